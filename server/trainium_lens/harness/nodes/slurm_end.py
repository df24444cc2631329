"""How SLURM ended a job, asked of SLURM itself (stdlib only; runs on the login host).

When srun ends before a run is complete, what the tasks printed as they were
stopped is torch's (``SignalException: Process 123 got signal: 15``, torchrun's
"Sending process … closing signal SIGTERM"): it says that the ranks were stopped,
never why. SLURM knows: a ``scancel``, a node whose ``slurmd`` the controller lost
(``NODE_FAIL`` once ``SlurmdTimeout`` passed), the time limit. ``job_end`` asks the
controller (``scontrol show job -o ID``: the record stays ``MinJobAge`` seconds after
the end, 300 by default), else its accounting (``sacct``, where a cluster keeps it),
and the nodes of a failed job that are down now (``sinfo``); ``cause`` turns an end
that is not the script's own doing into one line (docs/nodes.md, docs/scripts.md).
"""

from __future__ import annotations

import subprocess
import time

#: States of a job that has not ended yet. ``scontrol`` says ``COMPLETING`` (not
#: ``CANCELLED``) until every node has ended the job's processes: 7.5 s after a
#: ``scancel`` in the lab (``KillWait=2``), while srun had already exited.
NOT_ENDED = frozenset(
    {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING", "SIGNALING"}
)
#: How long ``job_end`` waits for a job srun has left to be recorded as ended: SLURM's
#: default ``KillWait`` (30 s) is how long a node gives a task between SIGTERM and SIGKILL.
SETTLE_S = 30.0


def end_events(jobs: set[str] | list[str], failed: bool) -> list[dict]:
    """A ``slurm_end`` event for each job SLURM knows, with its ``cause`` (None when
    the end is the script's own): what ``run -- srun …`` adds to its events when the
    command ends (targets/script.py here, the SSH wrapper on a login host). Asked after
    a success too: srun exited 0 in the lab after a ``scancel`` (``srun: error: Timed
    out waiting for job step to complete``: its tasks' statuses lost). Only a
    ``failed`` one (a non-zero status, or srun said its step was aborted) waits for a
    job still completing; a success looks once."""
    out = []
    for job in sorted(jobs):
        end = job_end(job, SETTLE_S if failed else 0.0)
        if end is not None:
            out.append({"event": "slurm_end", **end, "cause": cause(end)})
    return out


def job_end(job: str, wait_s: float = SETTLE_S) -> dict | None:
    """``{"job", "state", "end", "nodes", "limit", "by", "down"}`` of a job, or None
    when SLURM does not know it (any more). ``down``: the job's nodes that are down
    now, each ``(name, reason)``, asked only for a job a node failure ended."""
    if not str(job).isdigit():
        return None
    deadline = time.monotonic() + wait_s
    while True:
        seen = _scontrol(job) or _sacct(job)
        if seen is None or seen["state"] not in NOT_ENDED or time.monotonic() > deadline:
            break
        time.sleep(0.25)
    if seen is None:
        return None
    if seen["state"] == "NODE_FAIL":
        seen["down"] = _down(seen.get("nodes") or "")
    return {"job": str(job), **seen}


def cause(end: dict | None) -> str | None:
    """One line on an end that is SLURM's, not the script's (None for ``COMPLETED``,
    ``FAILED`` and a job that has not ended)."""
    if not end:
        return None
    job, state = end.get("job"), str(end.get("state") or "")
    at = f" at {end['end']}" if end.get("end") not in (None, "", "Unknown", "None") else ""
    if state == "CANCELLED":
        by = f" by uid {end['by']}" if end.get("by") else ""
        return f"the SLURM job {job} was cancelled{by}{at} (scancel)"
    if state == "NODE_FAIL":
        down = end.get("down") or []
        nodes = ", ".join(f"{name} ({why})" if why else name for name, why in down) or "a node of the job"
        return (
            f"{nodes} went down (the controller lost its slurmd): SLURM ended the job {job} "
            f"with NODE_FAIL{at}"
        )
    if state == "TIMEOUT":
        limit = f" ({end['limit']})" if end.get("limit") else ""
        return f"the SLURM job {job} reached its time limit{limit}{at}"
    words = {
        "PREEMPTED": "was preempted",
        "DEADLINE": "reached its deadline",
        "BOOT_FAIL": "ended: a node failed to boot",
        "OUT_OF_MEMORY": "ran out of memory",
    }
    if state in words:
        return f"the SLURM job {job} {words[state]}{at}"
    return None


def _run(argv: list[str]) -> str | None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def _scontrol(job: str) -> dict | None:
    return parse_scontrol(_run(["scontrol", "show", "job", "-o", job]) or "", job)


def parse_scontrol(out: str, job: str) -> dict | None:
    """``scontrol show job -o``'s one line of ``Key=Value`` words."""
    fields = dict(word.split("=", 1) for word in out.split() if "=" in word)
    if fields.get("JobId") != job or not fields.get("JobState"):
        return None
    return {
        "state": fields["JobState"],
        "end": fields.get("EndTime", ""),
        "nodes": fields.get("NodeList", ""),
        "limit": fields.get("TimeLimit", ""),
        "by": "",
    }


def _sacct(job: str) -> dict | None:
    """The accounting's record (``State`` reads ``CANCELLED by 1000``); None where the
    cluster keeps none (``sacct`` then fails: "accounting storage is disabled")."""
    out = _run(["sacct", "-n", "-P", "-X", "-j", job, "-o", "State,End,NodeList,Timelimit"])
    return parse_sacct(out or "")


def parse_sacct(out: str) -> dict | None:
    line = out.strip().splitlines()[:1]
    parts = line[0].split("|") if line else []
    if len(parts) != 4 or not parts[0]:
        return None
    state, _, by = parts[0].partition(" by ")
    return {"state": state.strip(), "end": parts[1], "nodes": parts[2], "limit": parts[3], "by": by.strip()}


def _down(nodelist: str) -> list[tuple[str, str]]:
    """The nodes of ``nodelist`` that are down now, with SLURM's reason."""
    if not nodelist:
        return []
    return parse_sinfo(_run(["sinfo", "-h", "-N", "-n", nodelist, "-o", "%N|%T|%E"]) or "")


def parse_sinfo(out: str) -> list[tuple[str, str]]:
    """``sinfo -N -o %N|%T|%E``: the nodes down, failed, drained or not responding (``*``)."""
    down = []
    for line in out.splitlines():
        name, _, rest = line.partition("|")
        state, _, reason = rest.partition("|")
        if any(w in state.lower() for w in ("down", "fail", "*", "drain")):
            down.append((name.strip(), "" if reason.strip() == "none" else reason.strip()))
    return sorted(set(down))

"""A job across nodes through SLURM, driven from the login host (stdlib only).

The SSH target starts the harness on the login host as for any run; a spec
with ``slurm`` (the request: nodes, partition, time, account, extra srun
options) makes that process this driver:

1. it writes the per-node spec (``nodes`` without node rank or master address:
   each task fills those from SLURM, ``slurm_task.py``) into the run folder,
   which must be on a filesystem the nodes share (the login host's home on a
   ParallelCluster; docs/nodes.md);
2. it starts the **guard** (``python -m trainium_lens.harness.nodes.slurm guard
   NAME``) in a session of its own with a pipe as its stdin: when that pipe
   closes (this driver ended in any way, a kill -9 of its whole group
   included) the guard runs ``scancel --name NAME``. Killing srun does not
   reliably end a job (a kill of srun's process group left it running until
   ``InactiveLimit``); scancel does;
3. ``srun --nodes N --ntasks-per-node 1 --kill-on-bad-exit=1`` one task per
   node, each task's output in its own file (srun's own output can interleave
   several tasks on one line); the tasks' event lines are relayed as they come;
4. while the allocation waits, ``squeue`` says why (a ``stage`` event
   ``pending``, with the reason) every ``POLL_S``;
5. once every node's launcher reported its result, their batches become one
   document (``rank_batches`` of every node), as on one node.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

from trainium_lens.harness.events import HarnessError, write_json_atomic
from trainium_lens.harness.nodes.slurm_end import SETTLE_S, cause, job_end
from trainium_lens.harness.reaper import SPARE_ENV

POLL_S = 1.0
# A node whose heartbeat (slurm_task.py: a counter rewritten every second in the
# shared run folder) has not changed for this long is taken for dead: SLURM itself
# notices only after SlurmdTimeout, and its peers wait in their collectives.
NODE_SILENT_S = 15.0
# A node's error that reads like a dropped peer is held this long past NODE_SILENT_S
# while another node may be the cause: killing a node's processes closes its sockets at
# once, so its peers' "connection closed" errors come before its silence shows.
PEER_HOLD_S = NODE_SILENT_S + 5.0
#: Once every node reported, how long srun may take to end before it is left to the guard.
END_GRACE_S = 10.0
JOB_PREFIX = "tlens-"


def job_name(batch_id: str) -> str:
    return JOB_PREFIX + batch_id


def srun_argv(request: dict, name: str, run_dir: str, python: str, node_spec: str) -> list[str]:
    """srun's command line: one task per node, each the node's launcher."""
    nodes = int(request.get("nodes") or 2)
    argv = [
        "srun",
        f"--job-name={name}",
        f"--nodes={nodes}",
        f"--ntasks={nodes}",
        "--ntasks-per-node=1",
        "--kill-on-bad-exit=1",
        "--unbuffered",
        f"--output={run_dir}/node%n.out",
        f"--error={run_dir}/node%n.err",
    ]
    for key, opt in (("partition", "--partition"), ("time", "--time"), ("account", "--account")):
        if request.get(key):
            argv.append(f"{opt}={request[key]}")
    argv += [str(a) for a in request.get("args") or []]
    argv += [python, "-m", "trainium_lens.harness.nodes.slurm_task", node_spec]
    return argv


def run(spec: Any, events: Any, spec_text: str) -> int:
    request = dict(spec.slurm or {})
    data = json.loads(spec_text)
    nnodes = int(request.get("nodes") or 2)
    run_dir = os.path.abspath(spec.run_dir)
    os.makedirs(run_dir, exist_ok=True)
    data.pop("slurm", None)
    data["nodes"] = {
        "nnodes": nnodes,
        "master_port": int(request.get("master_port") or 29400),
        "rdzv_id": spec.batch_id,
        "join_timeout_s": int(request.get("join_timeout_s") or 60),
        "pg_timeout_s": int(request.get("pg_timeout_s") or 120),
        **({"ifname": request["ifname"]} if request.get("ifname") else {}),
    }
    data["run_dir"] = run_dir
    node_spec = os.path.join(run_dir, "node-spec.json")
    write_json_atomic(node_spec, data)
    name = job_name(spec.batch_id)
    guard = subprocess.Popen(
        [sys.executable, "-m", "trainium_lens.harness.nodes.slurm", "guard", name],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # out of reach of the kill of our group
        env={**os.environ, SPARE_ENV: "1"},  # and of the reaper's sweep: it must scancel
    )
    argv = srun_argv(request, name, run_dir, sys.executable, node_spec)
    events.stage("submit", None, f"srun: {nnodes} nodes × {spec.nproc or 1} ranks as job {name}")
    try:
        srun = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
    except OSError as exc:
        guard.kill()
        raise HarnessError("backend_unavailable", f"cannot run srun on this host: {exc}") from None
    try:
        return _follow(spec, events, srun, name, run_dir, nnodes)
    finally:
        if srun.poll() is None:
            _scancel(name)
            try:
                srun.wait(timeout=END_GRACE_S)
            except subprocess.TimeoutExpired:
                srun.kill()
        assert guard.stdin is not None
        guard.stdin.close()  # the guard scancels (a no-op for an ended job) and exits


def _follow(spec: Any, events: Any, srun: subprocess.Popen, name: str, run_dir: str, nnodes: int) -> int:
    offsets = [0] * nnodes
    partial = [b""] * nnodes
    results: dict[int, str] = {}
    state, last_poll, nodelist, job = "", 0.0, "", ""
    waiting: set[int] = set()  # ranks whose watchdog said they wait in a collective
    nproc = int(spec.nproc or 1)
    beats: dict[int, tuple[str, float]] = {}  # node -> (its heartbeat's text, when it last changed)
    held: tuple[dict, float] | None = None  # a peer error, and when it came (PEER_HOLD_S)
    spoke: set[int] = set()  # nodes whose error is held: their silence after it is no news
    while True:
        ended = srun.poll() is not None
        silent = _silent_node(run_dir, nnodes, beats, set(results) | spoke)
        if silent is not None and not ended:
            k, quiet_s = silent
            raise HarnessError(
                "internal",
                f"{_node_name(_hostnames(nodelist), k)}: no sign of life for {quiet_s:.0f} s during the run "
                "(the node died, or lost the shared run folder); the job was cancelled on every node",
            )
        for k in range(nnodes):
            for event in _new_events(os.path.join(run_dir, f"node{k}.out"), k, offsets, partial):
                kind = event.pop("event")
                if kind == "result":
                    results[k] = str(event.get("path"))
                    if len(results) == nnodes:
                        path = _combine(spec, run_dir, results)
                        events.stage("done", None, f"{nnodes} nodes profiled")
                        events.emit("result", path=path)
                        return 0
                    continue
                if kind == "error":
                    # a node stopped by SLURM (scancel, a node lost) may speak first
                    _ended_by_slurm(job or _job_id(name), srun, results, nnodes, wait_s=0.0)
                    names = _hostnames(nodelist)
                    text = f"{_node_name(names, k)}: {event.get('message', '')}"
                    hung = _hung(waiting, nnodes, nproc, names)
                    if hung and _peerish(text):  # the others gave up waiting for a hung rank
                        text = f"{hung}; {text}"
                    event["message"] = text
                    if not hung and _peerish(text):
                        # a peer that noticed: the node that went away (its heartbeat
                        # stops) or a rank's own error elsewhere is the cause to name
                        held = held or (event, time.monotonic())
                        spoke.add(k)
                        continue
                    events.emit("error", **event)
                    return 1
                if (
                    kind == "stage"
                    and event.get("stage") == "collective"
                    and isinstance(event.get("rank"), int)
                ):
                    waiting.add(event["rank"])
                if kind == "stage" and "rank" not in event and k:
                    continue
                events.emit(kind, **event)
        if ended:
            _ended_by_slurm(job or _job_id(name), srun, results, nnodes)
        if held is not None and (ended or time.monotonic() - held[1] > PEER_HOLD_S):
            events.emit("error", **held[0])  # no other cause showed: the peer's error it is
            return 1
        if ended:
            break
        now = time.monotonic()
        if now - last_poll >= POLL_S:
            last_poll = now
            seen = _squeue(name)
            if seen is not None:
                job = seen[3] or job
                text = f"pending ({seen[1]})" if seen[0] == "PENDING" else f"{seen[0].lower()} on {seen[2]}"
                if seen[2]:
                    nodelist = seen[2]
                if text != state:
                    state = text
                    events.stage(
                        "pending" if seen[0] == "PENDING" else "allocation", None, f"job {name}: {text}"
                    )
        time.sleep(0.1)
    err = (srun.stderr.read() if srun.stderr else b"").decode("utf-8", "replace")
    tails = [_tail(os.path.join(run_dir, f"node{k}.err")) for k in range(nnodes)]
    missing = [str(k) for k in range(nnodes) if k not in results]
    why = next((t for t in tails if t), "") or _last(err)
    raise HarnessError(
        "internal",
        f"srun ended (exit status {srun.returncode}) before node(s) {', '.join(missing)} "
        f"reported a result{' on ' + nodelist if nodelist else ''}" + (f": {why}" if why else ""),
    )


def _ended_by_slurm(
    job: str, srun: subprocess.Popen, results: dict[int, str], nnodes: int, wait_s: float = SETTLE_S
) -> None:
    """A node's error came, or srun ended, before every node reported: when SLURM ended
    the job (a scancel, a node lost, the time limit: it records that before it signals
    the tasks), that is the cause, not what torch printed as its ranks were stopped
    (slurm_end.py)."""
    end = job_end(job, wait_s) if job else None
    why = cause(end)
    if end is None or why is None:
        return
    missing = ", ".join(str(k) for k in range(nnodes) if k not in results)
    ended = f"srun ended (exit status {srun.returncode})" if srun.poll() is not None else "srun was ending"
    kind = "cancelled" if end["state"] == "CANCELLED" else "internal"
    raise HarnessError(kind, f"{why}; {ended} before node(s) {missing} reported a result")


def _job_id(name: str) -> str:
    """The job's id by its name, from the controller's records of ended jobs too
    (a job too short for a poll to see it running)."""
    try:
        out = subprocess.run(
            ["squeue", "-h", "-t", "all", f"--name={name}", "-o", "%i"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.split()
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out[0] if out else ""


def _silent_node(
    run_dir: str, nnodes: int, beats: dict[int, tuple[str, float]], done: set[int]
) -> tuple[int, float] | None:
    """A node (and how long) whose heartbeat stopped changing, of those not ``done``
    (reported a result, or an error): judged on this host's clock by when its text
    changed, so the nodes' clocks do not matter."""
    now = time.monotonic()
    for k in range(nnodes):
        try:
            with open(os.path.join(run_dir, f"node{k}.alive"), encoding="utf-8") as handle:
                text = handle.read()
        except OSError:
            continue  # not started yet
        seen = beats.get(k)
        if seen is None or seen[0] != text:
            beats[k] = (text, now)
        elif k not in done and now - seen[1] > NODE_SILENT_S:
            return k, now - seen[1]
    return None


def _hostnames(nodelist: str) -> list[str]:
    """The allocation's host names in SLURM_NODEID order (``scontrol show hostnames``
    expands ``node[1-2]``); empty when unknown."""
    if not nodelist:
        return []
    try:
        out = subprocess.run(
            ["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True, timeout=10
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [h for h in out.split() if h]


def _node_name(names: list[str], k: int) -> str:
    return names[k] if k < len(names) else f"node {k}"


def _hung(waiting: set[int], nnodes: int, nproc: int, names: list[str]) -> str:
    """The ranks that never reached the collective the others waited in, with their
    node (as ``--hosts`` says it: targets/nodes/hosts.py)."""
    hung = [r for r in range(nnodes * nproc) if r not in waiting] if waiting else []
    if not hung:
        return ""
    listed = ", ".join(f"{_node_name(names, r // nproc)} / rank {r}" for r in hung)
    return f"{listed} did not reach the collective the other ranks waited in"


def _peerish(message: str) -> bool:
    """A rank's error that a peer caused (its collective timed out, a peer went away)."""
    low = message.lower()
    return any(w in low for w in ("connection", "peer", "gloo", "socket", "timed out", "timeout", "closed"))


def _new_events(path: str, k: int, offsets: list[int], partial: list[bytes]):
    try:
        with open(path, "rb") as handle:
            handle.seek(offsets[k])
            chunk = handle.read()
    except OSError:
        return
    offsets[k] += len(chunk)
    data = partial[k] + chunk
    *lines, partial[k] = data.split(b"\n")
    for raw in lines:
        text = raw.decode("utf-8", "replace").strip()
        if not text.startswith("{"):
            continue
        try:
            event = json.loads(text)
        except ValueError:
            continue
        if isinstance(event, dict) and isinstance(event.get("event"), str):
            yield event


def _squeue(name: str) -> tuple[str, str, str, str] | None:
    """(state, reason, node list, job id) of the job named ``name``."""
    try:
        out = subprocess.run(
            ["squeue", "-h", f"--name={name}", "-o", "%T|%r|%N|%i"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    line = out.strip().splitlines()[0] if out.strip() else ""
    parts = line.split("|")
    return (parts[0], parts[1], parts[2], parts[3]) if len(parts) == 4 else None


def _scancel(name: str) -> None:
    try:
        subprocess.run(["scancel", f"--name={name}"], capture_output=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        pass


def _tail(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return _last(handle.read())
    except OSError:
        return ""


def _last(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("{")]
    return lines[-1][:300] if lines else ""


def _combine(spec: Any, run_dir: str, results: dict[int, str]) -> str:
    rank_batches: list[dict] = []
    first: dict = {}
    for k in sorted(results):
        try:
            with open(results[k], encoding="utf-8") as handle:
                document = json.load(handle)
        except (OSError, ValueError) as exc:
            raise HarnessError("internal", f"node {k}: cannot read its batch {results[k]}: {exc}") from None
        first = first or document
        rank_batches.extend(document.get("rank_batches") or [])
    rank_batches.sort(key=lambda rb: int(rb.get("rank", 0)))
    out = os.path.join(run_dir, "batch.json")
    write_json_atomic(
        out,
        {**first, "batch_id": spec.batch_id, "world_size": len(rank_batches), "rank_batches": rank_batches},
    )
    return out


def guard(name: str) -> None:
    """Block until stdin closes, then scancel the job (whatever ended the driver)."""
    try:
        while os.read(0, 4096):
            pass
    except OSError:
        pass
    _scancel(name)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "guard":
        guard(sys.argv[2])

"""Run the user's own command with the harness injected (``trainium-lens run``),
on this machine.

The command is not rewritten: it runs in its cwd with its argv and the user's
environment, plus ``PYTHONPATH`` = the boot folder (``harness/script/boot``: a
``sitecustomize`` that chains to any other) and this package, and
``TRAINIUM_LENS_RUN`` = the spec file. Its stdout and stderr are the terminal's
(they stream as the script writes them). The harness reports through
``<run_dir>/events.jsonl``, read here as it grows.

The command runs under ``harness/script/owner.py``, a child subreaper leading a
process group of its own: what the command starts stays its descendant (in a
session of its own, double-forked, or a plain child that outlives it) and is
killed when the command exits, so the run ends at the command's exit and leaves
nothing running. Cancel, timeout and the end of the run stop that group; a pipe
the owner watches (its lifeline) stops it when this process dies, kill -9
included; every armed process dies with the owner (``PR_SET_PDEATHSIG``,
``harness/runtime/lifeline.py``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

from trainium_lens.errors import Cancelled, TargetError, TimedOut
from trainium_lens.harness.nodes.slurm_end import end_events
from trainium_lens.harness.reaper import scancel_jobs
from trainium_lens.harness.spec import ScriptSpec
from trainium_lens.targets.base import EventSink
from trainium_lens.targets.outcome import Outcome, Waiting, killed_ranks
from trainium_lens.targets.stream import PACKAGE_PARENT, kill_group

BOOT_DIR = PACKAGE_PARENT / "trainium_lens" / "harness" / "script" / "boot"
RUN_ENV = "TRAINIUM_LENS_RUN"
#: Runs the command as its subreaper (``-S``: the boot folder's sitecustomize is not its).
OWNER = ["-S", "-m", "trainium_lens.harness.script.owner"]
#: An interpreter that loads the spec says ``hello`` before the script's first line:
#: none after this long (the process still alive) means it never will.
HELLO_S = float(os.environ.get("TRAINIUM_LENS_HELLO_S", "10"))
POLL_S = 0.05


def hello_deadline(spec: ScriptSpec) -> float:
    """Seconds to the first ``hello``: none under srun, whose allocation may wait in
    the queue as long as the cluster is busy (srun itself says so on stderr)."""
    return float("inf") if spec.wrapper == "srun" else HELLO_S


class EventTail:
    """The events file, read line by line as the processes append to it."""

    def __init__(self, path: Path):
        self.path, self.offset, self.partial = path, 0, b""

    def read(self) -> list[dict]:
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self.offset)
                data = handle.read()
        except FileNotFoundError:
            return []
        self.offset += len(data)
        data = self.partial + data
        lines = data.split(b"\n")
        self.partial = lines.pop()
        out = []
        for raw in lines:
            try:
                obj = json.loads(raw.decode("utf-8", "replace"))
            except ValueError:
                continue
            if isinstance(obj, dict):
                out.append(obj)
        return out


def start_output_relay(stream: IO[bytes] | None, on_event: EventSink) -> threading.Thread:
    """Each line of ``stream`` as an ``output`` event, from a thread of its own."""

    def relay() -> None:
        assert stream is not None
        for line in iter(stream.readline, b""):
            on_event({"event": "output", "text": line.decode("utf-8", "replace")})

    thread = threading.Thread(target=relay, daemon=True)
    thread.start()
    return thread


def run_script(
    argv: list[str],
    cwd: Path,
    spec: ScriptSpec,
    run_dir: Path,
    on_event: EventSink,
    cancel: threading.Event | None = None,
    timeout: float | None = None,
    env_extra: dict[str, str] | None = None,
    capture: bool = False,
) -> Outcome:
    """``capture``: the command's stdout and stderr become ``output`` events (the
    language server's stdout is its protocol channel) instead of ours."""
    run_dir.mkdir(parents=True, exist_ok=True)
    spec_path = run_dir / "run-spec.json"
    spec_path.write_text(json.dumps(spec.to_dict()), encoding="utf-8")
    env = dict(os.environ)
    env.update(env_extra or {})
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(BOOT_DIR), str(PACKAGE_PARENT), env.get("PYTHONPATH", "")) if p
    )
    env[RUN_ENV] = str(spec_path)
    lifeline, held = os.pipe()  # the owner's lifeline: its end of file is ours
    try:
        proc = subprocess.Popen(
            [sys.executable, *OWNER, "--lifeline", str(lifeline), "--", *argv],
            cwd=str(cwd),
            env=env,
            start_new_session=True,
            stdin=subprocess.DEVNULL if capture else None,
            stdout=subprocess.PIPE if capture else None,
            stderr=subprocess.STDOUT if capture else None,
            pass_fds=(lifeline,),
        )
    except OSError as exc:
        os.close(held)
        raise TargetError(f"cannot start {argv[0]}: {exc.strerror or exc}") from None
    finally:
        os.close(lifeline)
    if capture:
        start_output_relay(proc.stdout, on_event)
    tail = EventTail(run_dir / "events.jsonl")
    outcome = Outcome(returncode=0)
    started = time.monotonic()
    hello = False
    jobs: set[str] = set()  # under srun: the SLURM jobs the armed tasks run in
    waiting = Waiting()

    def drain() -> None:
        nonlocal hello
        for event in tail.read():
            outcome.events.append(event)
            if event.get("event") == "hello":
                hello = True
                if isinstance(event.get("slurm_job"), str):
                    jobs.add(event["slurm_job"])
            if event.get("event") == "result" and isinstance(event.get("path"), str):
                outcome.results.append(event["path"])
            on_event(event)

    try:
        while True:
            drain()
            code = proc.poll()
            if code is not None:
                break
            if waiting.over(outcome.events):
                code, outcome.stopped_waiting = 1, True  # the finally stops what waits
                break
            elapsed = time.monotonic() - started
            if not hello and elapsed > hello_deadline(spec):
                raise TargetError(
                    f"the harness never armed in {argv[0]} ({HELLO_S:g} s and no word from it): "
                    "a -I/-E/-S interpreter or a wrapper that drops PYTHONPATH; run the interpreter directly"
                )
            if cancel is not None and cancel.is_set():
                raise Cancelled("cancelled")
            if timeout is not None and elapsed > timeout:
                raise TimedOut(
                    f"timed out after {timeout:g} s: the script and everything it started were stopped"
                )
            time.sleep(POLL_S)
        time.sleep(POLL_S)
        drain()
        outcome.returncode = code
        if jobs and not outcome.stopped_waiting:  # under srun: did SLURM end the job?
            # srun may exit 0 when SLURM ended it (slurm_end.end_events): ranks killed say so
            outcome.events.extend(end_events(jobs, failed=code != 0 or killed_ranks(outcome.events)))
        said = [e for e in outcome.events if e.get("event") == "cannot_start"]
        if said:
            raise TargetError(str(said[0].get("message"))[:300])
        if not hello:
            raise TargetError(
                f"the harness never armed in {argv[0]} (it exited with status {code} and no word from it): "
                "a -I/-E/-S interpreter or a wrapper that drops PYTHONPATH"
            )
        return outcome
    finally:
        if proc.poll() is None:  # stopped: the tasks srun started on other nodes end too
            scancel_jobs(jobs)
        kill_group(proc, grace=1.0)  # the owner sweeps what the command left, then ends
        os.close(held)

"""``trainium-lens run --host HOST -- COMMAND``: the user's command on an SSH host.

Over the user's OpenSSH and the target's shared connection (``targets/ssh/target.py``):
the workspace is synced to ``<work dir>/src`` (rsync or tar) with the harness
beside it, then ``wrapper.py --command`` (``lens/ssh_wrapper.py`` there) runs the command there in the
synced copy of the cwd, with the host's Python (``--remote-python``, else the
Neuron venv the target picks) in place of the local one. Its stdout is this
ssh's stdout (it streams as it comes); its stderr comes relayed line by line
with the harness's events between them (``wrapper.EVENT_MARK``).

Nothing is left on the host: this ssh's stdin is the wrapper's lifeline (its
end, from a cancel, a timeout or this process dying, makes the wrapper kill the
command's group), and a cancel or timeout also kills the group through the
master connection first.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Protocol

from trainium_lens.errors import Cancelled, TargetError, TimedOut
from trainium_lens.harness.spec import ScriptSpec
from trainium_lens.targets.base import EventSink
from trainium_lens.targets.outcome import Outcome, Waiting, slurm_ended
from trainium_lens.targets.script import HELLO_S, hello_deadline, start_output_relay
from trainium_lens.targets.ssh.conn import SshConnection
from trainium_lens.targets.ssh.wrapper import EVENT_MARK, MARK
from trainium_lens.targets.stream import kill_group


class Host(Protocol):
    """What this runner uses of its SSH target (``target.py``): its connection, its
    prepare and sync steps, reading a result there, stopping a group there."""

    host: str
    conn: SshConnection
    lock_wait_s: float

    def prepare(self, workspace: Path) -> dict: ...

    def sync(self, workspace: Path, info: dict, on_event: EventSink) -> None: ...

    def read_result(self, path: str) -> dict: ...

    def kill_remote(self, remote: dict) -> None: ...


_RUN = 'exec "$1" -S "$2/lens/ssh_wrapper.py" "$2" "$3" --lifeline --command'
_MARK = EVENT_MARK.encode()


def remote_argv(argv: list[str], launcher: str, python: str, inner: int = 0) -> list[str]:
    """The command with the host's Python in place of the local interpreter
    (torchrun as ``python -m torch.distributed.run``, which it is); under a
    wrapper (``srun … python …``, ``inner`` its index) the wrapped one's."""
    head, word, rest = argv[:inner], argv[inner], argv[inner + 1 :]
    if launcher == "torchrun" and not _is_python(word):
        return [*head, python, "-m", "torch.distributed.run", *rest]
    return [*head, python, *rest]


def _in_copy(word: str, workspace: Path, copy: str) -> str:
    """An absolute path inside the workspace (the editor names the script so) as the
    same file in the host's synced copy; any other word as it is."""
    root = str(workspace.resolve())
    if word == root:
        return copy
    if word.startswith(root + "/"):
        return copy + word[len(root) :]
    return word


def _is_python(word: str) -> bool:
    from trainium_lens.model.script import PYTHON

    return bool(PYTHON.match(word.rsplit("/", 1)[-1]))


def run_script_remote(
    target: Host,
    argv: list[str],
    launcher: str,
    workspace: Path,
    cwd: Path,
    spec: ScriptSpec,
    on_event: EventSink,
    cancel: threading.Event | None = None,
    timeout: float | None = None,
    env_extra: dict[str, str] | None = None,
    capture: bool = False,
    inner: int = 0,
) -> Outcome:
    """``capture``: the command's output as ``output`` events (``run_script``'s);
    ``inner``: where the Python starts in a wrapped command (``srun …``)."""
    started = time.monotonic()
    on_event({"event": "stage", "stage": "connect", "message": f"connecting to {target.host}"})
    target.conn.master()
    info = target.prepare(workspace)
    _check(cancel, timeout, started)
    target.sync(workspace, info, on_event)
    _check(cancel, timeout, started)
    wd = info["wd"]
    try:
        rel = cwd.resolve().relative_to(workspace.resolve()).as_posix()
    except ValueError:
        raise TargetError(f"the command's folder {cwd} is outside the workspace {workspace}") from None
    remote_cwd = f"{wd}/src" if rel == "." else f"{wd}/src/{rel}"
    # the run folder is the host's: in its work dir, as a profile's
    spec = dataclasses.replace(
        spec, workspace_root=f"{wd}/src", run_dir=f"{wd}/runs/{spec.batch_id}", host=target.host
    )
    job = {
        "argv": [
            _in_copy(a, workspace, f"{wd}/src") for a in remote_argv(argv, launcher, info["python"], inner)
        ],
        "cwd": remote_cwd,
        "env": dict(env_extra or {}),
        "run_spec": spec.to_dict(),
    }
    proc = subprocess.Popen(
        target.conn.argv(_RUN, [info["python"], wd, str(int(target.lock_wait_s))]),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE if capture else None,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    if capture:
        start_output_relay(proc.stdout, on_event)
    assert proc.stdin is not None and proc.stderr is not None
    proc.stdin.write((json.dumps(job) + "\n").encode())
    proc.stdin.flush()  # stdin stays open: the wrapper's lifeline
    outcome = Outcome(returncode=0)
    remote: dict = {}
    lock = threading.Lock()
    ssh_errors: list[bytes] = []

    def relay() -> None:
        assert proc.stderr is not None
        for line in iter(proc.stderr.readline, b""):
            if line.startswith(_MARK):
                try:
                    event = json.loads(line[len(_MARK) :])
                except ValueError:
                    continue
                if not isinstance(event, dict):
                    continue
                if event.get("event") == "heartbeat":  # the wrapper's, while it queues
                    continue
                if event.get("event") == "remote_process":
                    remote.setdefault("pgid", event.get("pgid"))
                    remote.setdefault("wrapper", event.get("wrapper"))
                    continue
                with lock:
                    outcome.events.append(event)
                    if event.get("event") == "result" and isinstance(event.get("path"), str):
                        outcome.results.append(event["path"])
                on_event(event)
            else:
                ssh_errors.append(line)
                ssh_errors[:] = ssh_errors[-20:]
                if capture:
                    on_event({"event": "output", "text": line.decode("utf-8", "replace")})
                else:
                    sys.stderr.buffer.write(line)
                    sys.stderr.buffer.flush()

    reader = threading.Thread(target=relay, daemon=True)
    reader.start()
    waiting = Waiting()
    try:
        while True:
            code = proc.poll()
            if code is not None:
                break
            with lock:
                over = waiting.over(outcome.events)
            if over:
                code, outcome.stopped_waiting = 1, True  # the finally stops what waits
                break
            hello = any(e.get("event") == "hello" for e in outcome.events)
            elapsed = time.monotonic() - started
            if not hello and "pgid" in remote and elapsed > hello_deadline(spec) + _since(remote, started):
                raise TargetError(
                    f"the harness never armed in {argv[0]} on {target.host} ({HELLO_S:g} s and no word "
                    "from it): a -I/-E/-S interpreter or a wrapper that drops PYTHONPATH"
                )
            _check(cancel, timeout, started)
            time.sleep(0.05)
        if not outcome.stopped_waiting:  # else the command still runs: its events are in
            reader.join(timeout=10)
        if "pgid" not in remote:  # it never started: ssh failed, or the work dir stayed busy
            text = b"".join(ssh_errors).decode("utf-8", "replace")
            said = [ln.split(MARK, 1)[1] for ln in text.splitlines() if MARK in ln]
            if said:
                raise TargetError(f"{target.host}: {said[-1][:300]}")
            if code == 255:
                last = text.strip().splitlines()[-1:] or ["?"]
                raise TargetError(f"{target.host}: ssh failed: {last[0][:200]}")
        outcome.returncode = code
        unstarted = [e for e in outcome.events if e.get("event") == "cannot_start"]
        if unstarted:
            raise TargetError(f"{target.host}: {str(unstarted[0].get('message'))[:300]}")
        if not any(e.get("event") == "hello" for e in outcome.events):
            ended = slurm_ended(outcome.events)
            if ended:  # srun's job ended by SLURM before any task ran Python
                raise TargetError(
                    f"{ended} before any rank armed (srun's exit status {code}; nothing stored)"
                )
            raise TargetError(
                f"the harness never armed in {argv[0]} on {target.host} (it exited with status {code} "
                "and no word from it)"
            )
        outcome.documents = {p: target.read_result(p) for p in outcome.results}
        return outcome
    finally:
        if proc.poll() is None:
            target.kill_remote(remote)  # through the master: the group, at once
        try:
            proc.stdin.close()  # the lifeline's end: the wrapper stops what is left
        except OSError:
            pass
        kill_group(proc, grace=2.0)


def _since(remote: dict, started: float) -> float:
    """When the wrapper said it started the command, seconds after ``started``."""
    if "at" not in remote:
        remote["at"] = time.monotonic() - started
    return float(remote["at"])


def _check(cancel: threading.Event | None, timeout: float | None, started: float) -> None:
    if cancel is not None and cancel.is_set():
        raise Cancelled("cancelled")
    if timeout is not None and time.monotonic() - started > timeout:
        raise TimedOut(f"timed out after {timeout:g} s: the script and everything it started were stopped")

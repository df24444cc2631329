"""Drive one harness process: spec in on stdin, events out on stdout.

Shared by every target. The local target runs ``python -m trainium_lens.harness``
directly; the SSH target runs ``ssh HOST 'cd ... && python -m ...'``. Either way
the process on this machine speaks the protocol of docs/protocol.md:

* the job spec (one JSON document, one line) is written to its stdin, which then
  stays open for the life of the run: it is the harness's lifeline
  (``harness/runtime/lifeline.py``). When this process ends, however it ends (SIGKILL
  included), the kernel closes the pipe and the harness kills its process group;
  over SSH the wrapper on the host does the same when ssh passes the end of file
  on. It is closed only once the harness has been reaped;
* each stdout line that is a JSON object is an event, passed to ``on_event``;
  any other line is user ``print`` output, passed on as
  ``{"event": "output", "text": ...}``;
* an ``error`` event ends the job with ``HarnessError``; a ``result`` event names
  the batch file, which ``read_result`` (a callback, because on SSH the path is
  remote) turns into the returned dict;
* stderr is kept as a bounded tail: when the process dies without a ``result``
  or ``error`` event, its last line is the reason given in ``TargetError``.

The process starts in a session (and process group) of its own, so a cancel or
a timeout can stop it together with everything it started (compile workers,
user subprocesses): SIGTERM to the group, a grace period, then SIGKILL. A
remote process group is out of reach of signals sent here; ``kill`` is the
target's hook to stop it (the SSH target kills the remote group through its
control connection) and is called before the local group is signalled.

Once the ``result`` (or ``error``) event is in, the outcome is handed back at
once: the batch is already complete on disk, and torch's interpreter teardown
can take seconds the user need not wait for. A reaper thread gives the harness
``TEARDOWN_GRACE_S`` to exit by itself, then stops its group. The thread is not
a daemon, so a short-lived caller (the CLI) still reaps before it exits: no run
leaves a process behind.

Events are delivered to ``on_event`` on the calling thread, in order.
"""

from __future__ import annotations

import collections
import json
import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

from trainium_lens.errors import Cancelled, HarnessError, TargetError, TimedOut
from trainium_lens.harness.reaper import kill_descendants

#: Seconds between SIGTERM and SIGKILL when stopping a process group.
KILL_GRACE_S = 2.0
#: Seconds the process may take to exit once its stdout has closed.
EXIT_GRACE_S = 10.0
#: Seconds a harness may take to exit after its ``result``/``error`` event
#: before its group is stopped (the result is already complete on disk).
TEARDOWN_GRACE_S = 1.0
#: How often cancel and the deadline are checked.
POLL_S = 0.05
#: Tells the harness its stdin is a lifeline (``harness/runtime/lifeline.py``: LIFELINE_ENV).
LIFELINE_ENV = "TRAINIUM_LENS_LIFELINE"
#: The folder holding the ``trainium_lens`` package (``server/`` in a checkout): on
#: ``PYTHONPATH`` for the harness this machine starts.
PACKAGE_PARENT = Path(__file__).resolve().parents[2]
STDERR_TAIL_LINES = 200
STDERR_LINE_CHARS = 2000

EOF = object()


class StderrTail:
    """The last lines a process wrote on stderr (bounded: a chatty process
    cannot grow memory without limit)."""

    def __init__(self, max_lines: int = STDERR_TAIL_LINES) -> None:
        self._lines: collections.deque[str] = collections.deque(maxlen=max_lines)
        self._lock = threading.Lock()

    def add(self, line: str) -> None:
        line = line.rstrip("\r\n")
        if len(line) > STDERR_LINE_CHARS:
            line = line[:STDERR_LINE_CHARS] + "…"
        with self._lock:
            self._lines.append(line)

    def text(self) -> str:
        with self._lock:
            return "\n".join(self._lines)

    def last_line(self) -> str | None:
        """The last non-empty line (for a Python crash: the exception)."""
        with self._lock:
            lines = [ln.strip() for ln in self._lines if ln.strip()]
        return lines[-1] if lines else None


def _pump(stream: IO[bytes], sink: Callable[[str], None], on_eof: Callable[[], None] | None = None) -> None:
    try:
        for raw in iter(stream.readline, b""):
            sink(raw.decode("utf-8", errors="replace"))
    except (OSError, ValueError):  # closed under us while stopping
        pass
    finally:
        try:
            stream.close()
        except OSError:
            pass
        if on_eof is not None:
            on_eof()


def parse_line(line: str) -> dict:
    """An event for one stdout line: the decoded object, or an ``output`` event."""
    text = line.rstrip("\r\n")
    if text.startswith("{"):
        try:
            obj = json.loads(text)
        except json.JSONDecodeError:
            obj = None
        if isinstance(obj, dict) and isinstance(obj.get("event"), str):
            return obj
    return {"event": "output", "text": text}


def kill_group(proc: subprocess.Popen, grace: float = KILL_GRACE_S) -> None:
    """SIGTERM the process's whole group, wait ``grace`` seconds, SIGKILL what is
    left. Safe to call when the process (or the group) is already gone."""
    pgid = proc.pid  # start_new_session=True: the leader's pid is the group id
    try:
        os.killpg(pgid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        pass
    # Wait for the leader only: children left as zombies (a container without
    # an init that reaps) would look alive to ``killpg(pgid, 0)`` forever.
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        # still there (its SIGTERM handler, which sweeps its descendants, could
        # not run): what it started outside its group goes first, while the
        # harness (a subreaper) still holds the orphans
        kill_descendants(pgid)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        pass


class Watch:
    """The two reasons to stop a job early, checked in one place: the user's
    cancel and the deadline. ``check()`` raises ``Cancelled``/``TimedOut``."""

    def __init__(self, cancel: threading.Event | None, timeout: float | None) -> None:
        self.cancel, self.timeout = cancel, timeout
        self.deadline = None if timeout is None else time.monotonic() + timeout

    def reason(self) -> Exception | None:
        if self.cancel is not None and self.cancel.is_set():
            return Cancelled("cancelled")
        if self.deadline is not None and time.monotonic() > self.deadline:
            return TimedOut(f"timed out after {self.timeout:g} s")
        return None

    def check(self) -> None:
        reason = self.reason()
        if reason is not None:
            raise reason


def start_process(
    argv: Sequence[str], env: dict[str, str] | None, cwd: str | os.PathLike | None
) -> subprocess.Popen:
    """``argv`` in a session (process group) of its own, all three streams piped."""
    try:
        return subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            env=env,
            cwd=None if cwd is None else str(cwd),
        )
    except OSError as exc:
        raise TargetError(f"cannot start {argv[0]}: {exc.strerror or exc}") from None


def start_readers(
    proc: subprocess.Popen,
    tail: StderrTail,
    on_stderr: Callable[[str], None] | None = None,
) -> tuple[queue.Queue, threading.Thread]:
    """Daemon threads pumping stdout lines into the returned queue (``EOF`` last)
    and stderr lines into ``tail`` (or ``on_stderr``); returns the queue and the
    stderr thread (join it for a dead process's last words)."""
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=_pump, args=(proc.stdout, lines.put, lambda: lines.put(EOF)), daemon=True).start()
    errors = threading.Thread(target=_pump, args=(proc.stderr, on_stderr or tail.add), daemon=True)
    errors.start()
    return lines, errors


def _send_spec(proc: subprocess.Popen, spec: dict) -> None:
    """The spec, one line; stdin then stays open (the lifeline) until ``_release``.
    A process that died at start-up shows up later as "ended without a result"."""
    try:
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(spec).encode("utf-8") + b"\n")
        proc.stdin.flush()
    except (BrokenPipeError, OSError, ValueError):
        pass


def _release(proc: subprocess.Popen) -> None:
    """Close the lifeline: the harness has been reaped (or its group stopped)."""
    try:
        if proc.stdin is not None:
            proc.stdin.close()
    except OSError:
        pass


class _Outcome:
    """What the event stream said: the result path and/or the error event."""

    def __init__(self) -> None:
        self.result_path: str | None = None
        self.error_event: dict | None = None
        self.handed_off = False  # the final event is in: the reaper thread owns the process

    def note(self, event: dict) -> bool:
        """Record ``event``; True when it is the final one."""
        kind = event.get("event")
        if kind == "error" and self.error_event is None:
            self.error_event = event
        elif kind == "result" and isinstance(event.get("path"), str):
            self.result_path = event["path"]
        return kind in ("error", "result")


def _read_events(
    proc: subprocess.Popen,
    lines: queue.Queue,
    emit: Callable[[dict], None],
    watch: Watch,
    stop: Callable[[Exception], Exception],
) -> _Outcome:
    """Forward events until the final one (then hand the process to a reaper) or
    until stdout closes."""
    outcome = _Outcome()
    while True:
        reason = watch.reason()
        if reason is not None:
            raise stop(reason)
        try:
            item = lines.get(timeout=POLL_S)
        except queue.Empty:
            continue
        if item is EOF:
            return outcome
        event = parse_line(item)
        final = outcome.note(event)
        emit(event)
        if final:
            # All said; the interpreter may take seconds to tear torch down.
            threading.Thread(target=_reap, args=(proc,), name="harness-reaper", daemon=False).start()
            outcome.handed_off = True
            return outcome


def _await_exit(proc: subprocess.Popen, watch: Watch, stop: Callable[[Exception], Exception]) -> None:
    """stdout closed without a final event: the process is exiting (or closed
    stdout and lingers)."""
    exit_deadline = time.monotonic() + EXIT_GRACE_S
    while proc.poll() is None:
        reason = watch.reason()
        if reason is not None:
            raise stop(reason)
        if time.monotonic() > exit_deadline:
            stop(TargetError("the harness did not exit"))
            return
        time.sleep(POLL_S)


def _sweep(proc: subprocess.Popen, stop: Callable[[Exception], Exception]) -> None:
    """Leave nothing behind: stop a process still running (an exception on our
    side, e.g. KeyboardInterrupt), or kill what a finished one left in its group
    (e.g. a stuck compile worker)."""
    if proc.poll() is None:
        stop(Cancelled("cancelled"))
        return
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_harness_process(
    argv: Sequence[str],
    spec: dict,
    on_event: Callable[[dict], None] | None,
    cancel: threading.Event | None,
    timeout: float | None,
    *,
    read_result: Callable[[str], dict],
    kill: Callable[[], None] | None = None,
    env: dict[str, str] | None = None,
    cwd: str | os.PathLike | None = None,
) -> dict:
    """Run the harness command ``argv`` for ``spec``; return the batch document.

    ``read_result(path)`` reads the batch file the ``result`` event names and
    returns it as a dict (raise ``TargetError`` when it cannot). ``kill()`` stops
    anything the local process group does not contain (a remote harness).

    Raises ``HarnessError`` (the harness reported an error event),
    ``Cancelled`` / ``TimedOut`` (after stopping the process group and calling
    ``kill``), ``TargetError`` (could not start it, or it ended without a
    result or error event).
    """
    emit = on_event or (lambda _event: None)
    watch = Watch(cancel, timeout)
    env = {**(os.environ if env is None else env), LIFELINE_ENV: "stdin"}
    proc = start_process(argv, env, cwd)
    tail = StderrTail()
    lines, errors = start_readers(proc, tail)
    _send_spec(proc, spec)

    def stop(error: Exception) -> Exception:
        if kill is not None:
            try:
                kill()
            except Exception:  # the local group is stopped regardless
                pass
        kill_group(proc)
        return error

    outcome = _Outcome()
    try:
        outcome = _read_events(proc, lines, emit, watch, stop)
        if not outcome.handed_off:
            _await_exit(proc, watch, stop)
            errors.join(timeout=1.0)  # the dead process's last words
    finally:
        if not outcome.handed_off:
            _sweep(proc, stop)
            _release(proc)
    if outcome.error_event is not None:
        raise HarnessError.from_event(outcome.error_event)
    if outcome.result_path is None:
        raise EndedWithoutResult(f"the harness ended without a result: {_why(proc, tail)}", proc.returncode)
    return read_result(outcome.result_path)


class EndedWithoutResult(TargetError):
    """The harness command ended with neither a result nor an error event; ``code``
    is its exit status (over SSH, 255 is ssh's own: the connection ended)."""

    def __init__(self, message: str, code: int | None) -> None:
        super().__init__(message)
        self.code = code


def _reap(proc: subprocess.Popen) -> None:
    """After the final event: let the harness exit by itself for
    ``TEARDOWN_GRACE_S``, then stop whatever is left of its group."""
    try:
        proc.wait(timeout=TEARDOWN_GRACE_S)
    except subprocess.TimeoutExpired:
        kill_group(proc)
    try:  # anything it left in its group (e.g. a stuck compile worker)
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    _release(proc)


def describe_exit(code: int | None, last: str | None) -> str:
    """One line on why a process ended early: its signal, its last words."""
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        hint = " (out of memory?)" if -code == signal.SIGKILL else ""
        return f"killed by {name}{hint}" + (f"; last output: {last}" if last else "")
    return last or f"exit status {code}"


def _why(proc: subprocess.Popen, tail: StderrTail) -> str:
    return describe_exit(proc.returncode, tail.last_line())

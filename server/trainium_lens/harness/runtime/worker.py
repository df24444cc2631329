"""A warm harness: a fork server with torch imported that runs one job per child.

``python -m trainium_lens.harness.runtime.worker [--idle SECONDS]`` (stdlib + torch; runs on
the target like the rest of the harness). The language server keeps one per
target (``targets/warm/slot.py``) so that a profile need not pay ``import torch``
(about 2 s here, more with torch-neuronx) on every run.

Protocol (JSON lines, the harness's own event format):

* stdin, one command per line: ``{"op": "run", "spec": {...job spec...},
  "lock": PATH?, "inline_batch": bool?}``, ``{"op": "cancel"}``, ``{"op": "quit"}``;
* stdout: ``{"event": "ready", "pid", "torch", "import_s"}`` once torch is in;
  per job ``{"event": "job", "pid"}`` (the child, a process-group leader), then
  the child's own harness events (``stage`` ... ``result`` | ``error``; with
  ``inline_batch`` a ``batch`` event holding the document follows ``result``, which
  saves an SSH round trip), then ``{"event": "job_exit", "pid", "status"}``
  (exit code, or minus the signal number).

Why a fork server (docs/harness.md, "Warm worker", has the figures): the parent imports
torch and never runs user code or a torch op, so every child starts from the
same pristine state: user modules are imported anew (the parent never imported
them), globals are fresh, and torch state a job can change (seeds, default
dtype, grad mode, function modes, deterministic flags, dynamo caches, the CUDA
context) dies with the child. A crash (``os._exit``, a segfault, the OOM
killer) ends only the child; the parent reports its status. CUDA and the Neuron
runtime are initialised only in children (fork after their start is unsafe), so
an idle worker holds no device.

The worker ends when its stdin closes (the language server or the SSH channel is
gone), when its parent process changes, after ``--idle`` seconds without a job,
or on ``quit``; a job in flight is killed with its whole process group first.
"""

from __future__ import annotations

import io
import json
import os
import select
import signal
import sys
import time

from trainium_lens.harness import reaper

#: Seconds between SIGTERM and SIGKILL when a job is cancelled.
KILL_GRACE_S = 2.0
POLL_S = 0.25
PR_SET_PDEATHSIG = 1


class Worker:
    def __init__(self, idle_s: float):
        self.idle_s = idle_s
        self.ppid = os.getppid()
        self.pid = os.getpid()
        # Events go to a private copy of stdout; fd 1 points at stderr so that
        # nothing torch prints while importing can break a line of the protocol.
        sys.stdout.flush()
        self.events_fd = os.dup(1)
        os.dup2(2, 1)
        self.buf = b""
        self.eof = False  # stdin closed: the client is gone

    # -- output -------------------------------------------------------------------
    def emit(self, event: str, **fields) -> None:
        data = (json.dumps({"event": event, **fields}) + "\n").encode("utf-8")
        while data:
            data = data[os.write(self.events_fd, data) :]

    # -- input ----------------------------------------------------------------------
    def orphaned(self) -> bool:
        return os.getppid() != self.ppid

    def read_command(self, timeout: float | None) -> dict | None:
        """The next command; None at EOF, on an orphaned worker or after ``timeout``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self.buf:
            wait = POLL_S if deadline is None else min(POLL_S, deadline - time.monotonic())
            if wait <= 0 or self.orphaned():
                return None
            ready, _, _ = select.select([0], [], [], wait)
            if ready:
                chunk = os.read(0, 65536)
                if not chunk:
                    self.eof = True
                    return None
                self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        try:
            command = json.loads(line)
        except ValueError:
            command = None
        return command if isinstance(command, dict) else {"op": "invalid"}

    # -- jobs -----------------------------------------------------------------------
    def serve(self) -> int:
        while True:
            command = self.read_command(self.idle_s if self.idle_s > 0 else None)
            if command is None or command.get("op") == "quit":
                return 0
            if command.get("op") == "run" and isinstance(command.get("spec"), dict):
                if not self.run_job(command):
                    return 0
            # "cancel" with no job in flight, or garbage: nothing to do

    def run_job(self, command: dict) -> bool:
        """Fork a child for one job, watch it, report its exit. False: stop serving
        (stdin closed, ``quit``, or the worker was orphaned while the job ran)."""
        try:
            lock_fd = _take_lock(command.get("lock"), self)
        except _Stop as stop:  # cancelled (or the client went) while waiting for the lock
            self.emit("job_exit", pid=None, status=-signal.SIGTERM)
            return stop.keep_serving
        go_read, go_write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child never returns
            os.close(go_write)
            _child(self, command, go_read, lock_fd)
        os.close(go_read)
        # The job event goes out before the child may write anything (it waits for
        # go): a long child line can never be split by ours.
        self.emit("job", pid=pid)
        os.close(go_write)
        status, keep_serving = self.watch(pid)
        try:  # anything the job left in its group (a stuck compile worker)
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        # and what it left outside the group: the worker is a subreaper, so an
        # orphan of the job (its own session, a daemon) is a descendant here
        reaper.kill_descendants()
        if lock_fd is not None:
            os.close(lock_fd)
        self.emit("job_exit", pid=pid, status=status)
        return keep_serving

    def watch(self, pid: int) -> tuple[int, bool]:
        """Wait for the child; meanwhile obey ``cancel``/``quit`` and notice a
        closed stdin. Returns (status, keep serving)."""
        try:
            exit_fd = os.pidfd_open(pid)  # readable when the child exits (Linux 5.3+)
        except (AttributeError, OSError):
            exit_fd = None
        keep = True
        try:
            while True:
                status = _reaped(pid)
                if status is not None:
                    return status, keep
                stop = self.orphaned()
                fds = [0] if exit_fd is None else [0, exit_fd]
                ready, _, _ = select.select(fds, [], [], 0.01 if exit_fd is None else POLL_S)
                if 0 in ready:
                    chunk = os.read(0, 65536)
                    if not chunk:
                        stop = True
                    self.buf += chunk
                while b"\n" in self.buf and not stop:
                    line, self.buf = self.buf.split(b"\n", 1)
                    try:
                        op = json.loads(line).get("op")
                    except (ValueError, AttributeError):
                        op = None
                    if op in ("cancel", "quit"):
                        keep = keep and op == "cancel"
                        return _kill_group(pid, KILL_GRACE_S), keep
                if stop:  # the language server (or the SSH channel) is gone
                    return _kill_group(pid, 0.5), False
        finally:
            if exit_fd is not None:
                os.close(exit_fd)


def _reaped(pid: int, block: bool = False) -> int | None:
    try:
        got, status = os.waitpid(pid, 0 if block else os.WNOHANG)
    except ChildProcessError:
        return -1
    if got == 0:
        return None
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def _signal_job(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        try:  # not yet a group leader (setsid not reached)
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _kill_group(pid: int, grace: float) -> int:
    """SIGTERM the job's group, SIGKILL after ``grace``; its exit status."""
    _signal_job(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        status = _reaped(pid)
        if status is not None:
            return status
        time.sleep(0.02)
    _signal_job(pid, signal.SIGKILL)
    status = _reaped(pid, block=True)
    return -signal.SIGKILL if status is None else status


class _Stop(Exception):
    def __init__(self, keep_serving: bool):
        super().__init__()
        self.keep_serving = keep_serving


def _take_lock(path, worker: Worker):
    """The host's work-dir lock (as targets/ssh/wrapper.py takes it for a cold run), held
    while the job runs; another run holding it makes this one wait (``queue``),
    still obeying ``cancel`` and a closed stdin (``_Stop``)."""
    if not isinstance(path, str) or not path:
        return None
    import fcntl

    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    announced = False
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if not announced:
                worker.emit(
                    "stage",
                    stage="queue",
                    function=None,
                    message="another run is using this host's work dir: waiting",
                )
                announced = True
        command = worker.read_command(0.1) if not worker.orphaned() else None
        if command is not None and command.get("op") not in ("cancel", "quit"):
            continue
        if command is not None or worker.orphaned() or worker.eof:
            os.close(fd)
            raise _Stop(command is not None and command.get("op") == "cancel")


def _set_pdeathsig() -> None:
    """The child dies with the worker (Linux): no job outlives a killed worker."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _child(worker: Worker, command: dict, go_read: int, lock_fd) -> None:
    """Run one job in the forked child and exit (never returns)."""
    code = 70
    try:
        os.setsid()  # its own group: cancel stops it with everything it starts
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # as a cold harness: TERM ends it
        _set_pdeathsig()
        if os.getppid() != worker.pid:  # the worker died before PDEATHSIG was set
            os._exit(70)
        os.read(go_read, 1)  # EOF once the parent sent the job event
        os.close(go_read)
        if lock_fd is not None:
            os.close(lock_fd)  # the parent holds the lock and releases it
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)  # the command pipe belongs to the parent
        os.close(devnull)
        os.dup2(worker.events_fd, 1)  # the harness claims fd 1 for its events
        keep_fd = os.dup(worker.events_fd)
        os.close(worker.events_fd)
        spec = command["spec"]
        root = spec.get("workspace_root")
        if isinstance(root, str) and os.path.isdir(root):
            os.chdir(root)
        import random

        random.seed()  # as a fresh interpreter would: not the parent's state
        sys.stdin = io.StringIO(json.dumps(spec))
        from trainium_lens.harness.__main__ import main

        code = main()
        if command.get("inline_batch") and code == 0:
            _send_batch(keep_fd, spec)
    except BaseException:  # noqa: BLE001 - the status says it; nothing may escape the fork
        code = 70
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except Exception:  # noqa: BLE001
            pass
        os._exit(code)  # no interpreter teardown: torch's takes seconds


def _send_batch(fd: int, spec: dict) -> None:
    path = os.path.join(str(spec.get("run_dir")), "batch.json")
    try:
        with open(path, encoding="utf-8") as handle:
            document = json.load(handle)
    except (OSError, ValueError):
        return  # the client reads the file itself
    data = (
        json.dumps({"event": "batch", "path": os.path.abspath(path), "document": document}) + "\n"
    ).encode("utf-8")
    while data:
        data = data[os.write(fd, data) :]


def warm_imports() -> dict:
    """What every job would import first: torch and the harness's own modules.
    Nothing here may start a thread pool or a device (fork after either is unsafe)."""
    started = time.monotonic()
    info: dict[str, object] = {"torch": None}
    try:
        import torch

        info["torch"] = torch.__version__
        import torch.profiler  # noqa: F401

        from trainium_lens.harness.attribution import build, tree  # noqa: F401
        from trainium_lens.harness.eager import backends, lines, run  # noqa: F401
    except ImportError:
        pass  # the job's child reports torch_missing as a cold run does
    try:
        # What ``torch.compile`` imports (3 s here): user files call it at import
        # time. Importing starts no thread and no compile worker.
        import torch._dynamo  # noqa: F401
        import torch._inductor.compile_fx  # noqa: F401
    except ImportError:
        pass  # the job's child reports torch_missing as a cold run does
    info["import_s"] = round(time.monotonic() - started, 3)
    return info


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    idle_s = 0.0
    if len(args) >= 2 and args[0] == "--idle":
        idle_s = float(args[1])
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    reaper.become_subreaper()  # a job's orphans come back here, and go after the job
    worker = Worker(idle_s)
    info = warm_imports()
    worker.emit("ready", pid=os.getpid(), **info)
    return worker.serve()


if __name__ == "__main__":
    sys.exit(main())

"""Every process a run starts ends with the run, in its own session or not.

A process group holds what a process starts only until the code it runs calls
``setsid`` (``subprocess.Popen(..., start_new_session=True)``, common for
helper servers) or double-forks a daemon (which then belongs to init): killing
the group leaves those running. So the processes that run user code (the
harness, the warm worker and its job child, every torchrun rank) become *child
subreapers* (``PR_SET_CHILD_SUBREAPER``): an orphan below one is re-parented to
it instead of to init, so it stays a descendant, and ``kill_descendants`` finds
it by walking ``/proc`` (the parent of every process) and SIGKILLs it. They do
so when the run ends, however it ends (docs/architecture.md, "Process
lifetime").

Linux only (the targets are Linux); elsewhere the calls are no-ops. Stdlib
only: the core and the SSH wrapper use it too, to sweep what a harness they
stop has started before they kill its group.
"""

from __future__ import annotations

import os
import signal
import sys
import time

PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    """Orphans below this process become its children (not init's)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _parents() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, state) of every process /proc shows now."""
    out: dict[int, tuple[int, str]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
            out[int(name)] = (int(fields[1]), fields[0].decode("ascii", "replace"))
        except (OSError, IndexError, ValueError):
            continue
    return out


#: A process started with this in its environment (and what it starts) is spared: the
#: harness's own helpers that must outlive a kill to clean up after it (the SLURM
#: guard's ``scancel``: killing srun does not end a job). Bounded, and never user code:
#: the harness sets it only on its own commands.
SPARE_ENV = "TRAINIUM_LENS_REAPER_SPARE"
_SPARE_MARK = (SPARE_ENV + "=1").encode()


def _spared(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            return _SPARE_MARK in handle.read().split(b"\0")
    except OSError:
        return False


def descendants(root: int) -> list[int]:
    """The live (not zombie) descendants of ``root``, parents before children, less
    those spared (``SPARE_ENV``) and theirs."""
    table = _parents()
    children: dict[int, list[int]] = {}
    for pid, (parent, _state) in table.items():
        children.setdefault(parent, []).append(pid)
    found: list[int] = []
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child != root and child not in found and not _spared(child):
                found.append(child)
                todo.append(child)
    return [pid for pid in found if table[pid][1] != "Z"]


def kill_descendants(root: int | None = None, passes: int = 50) -> int:
    """SIGKILL every descendant of ``root`` (default: this process) until none is
    left (one may fork while we look: passes repeat); returns how many were
    killed. Zombies of our own are reaped."""
    me = os.getpid()
    root = me if root is None else root
    killed: set[int] = set()
    for _ in range(passes):
        left = descendants(root)
        if not left:
            break
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            except (ProcessLookupError, PermissionError):
                pass
        if root == me:
            _reap_zombies()
        time.sleep(0.005)
    if root == me:
        _reap_zombies()
    return len(killed)


def _reap_zombies() -> None:
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except (ChildProcessError, OSError):
            return
        if pid == 0:
            return


def scancel_jobs(job_ids: list[str] | set[str]) -> None:
    """End SLURM jobs a stopped run started (``run -- srun …``): the tasks on other
    nodes are not descendants of anything here. Killing srun ends its step only if
    srun lives to tell the controller (docs/lab.md: a kill -9 of srun's group left
    the job running); scancel asks the controller itself. A job that has ended
    already makes it a no-op."""
    ids = sorted(j for j in job_ids if str(j).isdigit())
    if not ids:
        return
    import subprocess

    try:
        subprocess.run(["scancel", *ids], capture_output=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        pass


PR_SET_PDEATHSIG = 1


def term_with_parent() -> None:
    """For ``preexec_fn``: the kernel sends this child SIGTERM when the thread that
    started it ends (the CLI killed with -9 included). For a command whose own
    handler must run to end what it started elsewhere: srun on SIGTERM ends its job
    step, or revokes an allocation still pending (a SIGKILL would leave the job to
    run). Kept across exec for a binary that is not set-uid."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
    except (OSError, AttributeError):
        pass

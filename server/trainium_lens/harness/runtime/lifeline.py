"""Die with whoever started us: no way of stopping the tool leaves code running.

Two mechanisms, each used by the process it protects:

* **A pipe the child watches** (``hold``): the target that starts the harness
  (``targets/stream.py``) writes the spec as one line on its stdin and keeps
  the pipe open for the life of the run. The harness reads that line, moves
  the pipe to a private descriptor (user code sees an empty stdin, as before)
  and watches it: end of file means the starter is gone, whatever the reason
  (it exited, crashed, was SIGKILLed: the kernel closes its end), and the
  harness kills its own process group (it leads one: ``start_new_session``),
  which holds everything it started (torchrun's agent, compile workers). A pipe
  has no race: if the starter died before the harness looked, the end of file
  is already there.
* **PR_SET_PDEATHSIG** (``die_with_parent``): for processes whose starter
  cannot hand them a pipe (torchrun's agent and its ranks, which it starts in
  sessions of their own). The kernel SIGKILLs the process when its parent
  dies; the parent's pid, recorded when it started us, is compared right after
  the call, so a parent that died before it is caught too (``getppid()`` alone
  would then name init or a subreaper, and the check would pass). It is set
  before the process imports torch or runs user code, so nothing can fork away
  first. Linux only (the targets are Linux); elsewhere a no-op.

Stdlib only.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

#: Set by the starter to ``stdin``: the spec is the first line of stdin and the
#: rest of stdin is the lifeline. Removed from the environment once read, so the
#: processes the harness starts never take it for theirs.
LIFELINE_ENV = "TRAINIUM_LENS_LIFELINE"
PR_SET_PDEATHSIG = 1

_SPEC: list[str] = []


def hold() -> None:
    """Take the spec line from stdin and watch the rest of it (when the starter
    asked for it through ``LIFELINE_ENV``); a no-op otherwise (a spec piped in by
    hand: ``python -m trainium_lens.harness < spec.json``)."""
    if os.environ.pop(LIFELINE_ENV, "") != "stdin":
        return
    line = sys.stdin.buffer.readline()
    _SPEC.append(line.decode("utf-8", "replace"))
    watched = os.dup(0)  # not inheritable: the processes we start never hold it
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)  # user code reading stdin sees end of file, as without a lifeline
    os.close(null)
    threading.Thread(target=_watch, args=(watched,), name="lens-lifeline", daemon=True).start()


def spec_text() -> str | None:
    """The spec line ``hold`` took, else None (read stdin as usual)."""
    return _SPEC[0] if _SPEC else None


def _watch(fd: int) -> None:
    try:
        while os.read(fd, 4096):
            pass
    except OSError:
        pass
    kill_own_group()


def kill_own_group() -> None:
    """SIGKILL our process group when we lead it (everything we started with
    it), else only ourselves; first every descendant, in a session of its own
    or not (``reaper``)."""
    from trainium_lens.harness import reaper

    me = os.getpid()
    try:
        reaper.kill_descendants()
        if os.getpgrp() == me:
            os.killpg(me, signal.SIGKILL)
    finally:
        os.kill(me, signal.SIGKILL)


def die_with_parent(expected_parent: int | None) -> None:
    """Have the kernel SIGKILL this process when its parent dies; exit now if
    the parent is not ``expected_parent`` any more (it died before the call)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):
        return
    if expected_parent is not None and os.getppid() != expected_parent:
        os._exit(1)


def parent_from_env(name: str) -> int | None:
    """The parent pid a starter recorded in ``name`` (removed from the environment)."""
    raw = os.environ.pop(name, "")
    return int(raw) if raw.isdigit() else None

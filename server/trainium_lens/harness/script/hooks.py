"""What a script's run puts into the script's own process beside its step hooks
(``detect.py``): the DataLoader's timing, the excepthook that names the user line a
script raised from, the clean exit of ``--exit-after``, the watch on the script's
own torch.profiler, and the code object the line labels end their chain at
(``never``). ``run`` is the ``session.ScriptRun`` (typed ``Any``: session imports
this module)."""

from __future__ import annotations

import os
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any


def never() -> None:  # a code object no frame runs: the labels' chain walks to the top
    pass


def time_data_loader(run: Any) -> Callable[[], None]:
    """Time every DataLoader ``__next__`` of the script's own process (not the
    harness's work at a boundary), summed per step, with the line that asked. Returns
    what undoes it (a notebook kernel lives on after its cell: ``in_cell.py``)."""
    try:
        from torch.utils.data.dataloader import _BaseDataLoaderIter
    except ImportError:
        return lambda: None
    original = _BaseDataLoaderIter.__next__

    def timed(self: Any) -> Any:
        if os.getpid() != run.pid or run.busy:
            return original(self)
        t0 = time.perf_counter()
        try:
            return original(self)
        finally:
            run.data_step += time.perf_counter() - t0
            if run.data_site is None:
                caller = sys._getframe(1)
                run.data_site = (caller.f_code.co_filename, caller.f_lineno)

    _BaseDataLoaderIter.__next__ = timed

    def undo() -> None:
        if _BaseDataLoaderIter.__next__ is timed:
            _BaseDataLoaderIter.__next__ = original

    return undo


def watch_own_profilers(run: Any) -> None:
    """Tell ``run.script_profiles()`` when the script starts a profiler of its own.

    Kineto runs one profiler per process at a time: a second one's start fails, or
    (torch 2.13) leaves the first's trace empty. Every profile the script can start
    passes through one of two methods: ``torch.profiler.profile.start`` (``with
    profile(schedule=…)`` enters it even while its schedule still waits, before it
    records anything) and ``torch.autograd.profiler.profile._prepare_trace`` (the
    kineto session itself: torch.profiler's warm-up, the legacy ``with
    torch.autograd.profiler.profile()``; a disabled one never reaches it). The
    harness's own profiles start at a step boundary (``run.busy``): not the script's."""
    try:
        import torch.autograd.profiler as autograd_profiler
        import torch.profiler.profiler as kineto_profiler
    except ImportError:
        return
    for cls, name in ((kineto_profiler.profile, "start"), (autograd_profiler.profile, "_prepare_trace")):
        original = getattr(cls, name)
        if getattr(original, "_trainium_lens", False):
            continue

        def starts(self: Any, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
            if os.getpid() == run.pid and not run.busy:
                run.script_profiles()  # the harness's profilers stop before the script's starts
            return _original(self, *args, **kwargs)

        starts._trainium_lens = True  # type: ignore[attr-defined]
        setattr(cls, name, starts)


def exit_cleanly() -> None:
    """``--exit-after``: end here, status 0, at the same step on every rank (a
    ``sys.exit`` would run into the script's own ``except``/checkpoint code)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(0)


def chain_excepthook(run: Any) -> None:
    """A script that raises: its traceback as usual, and the user line it came
    from as an event (the CLI's one line, the editor's diagnostic)."""
    previous = sys.excepthook

    def hook(tp: Any, value: Any, tb: Any) -> None:
        if os.getpid() == run.pid:
            file, line = run.user.innermost_frame(tb)
            run.events.emit(
                "raised",
                kind="user_code",
                message=f"{tp.__name__}: {value}",
                file=file,
                line=line,
                steps=run.step,
                traceback="".join(traceback.format_exception(tp, value, tb)),
            )
        previous(tp, value, tb)

    sys.excepthook = hook

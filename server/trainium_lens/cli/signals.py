"""SIGTERM and SIGHUP (a closed terminal, a killed parent) stop a run the way
Ctrl-C does: the ``Cancelled`` they raise unwinds through the target, which stops
the harness's (or the script's) process group before the command exits."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import NoReturn

from trainium_lens.errors import Cancelled


@contextmanager
def stopping_on_signals() -> Iterator[None]:
    """Inside: SIGTERM/SIGHUP raise ``Cancelled``; on leaving, the handlers before."""

    def stop(signum: int, _frame: FrameType | None) -> NoReturn:
        raise Cancelled(f"stopped by {signal.Signals(signum).name}")

    previous = {}
    for signum in (signal.SIGTERM, signal.SIGHUP):
        try:
            previous[signum] = signal.signal(signum, stop)
        except ValueError:  # not the main thread (embedded use): leave as is
            pass
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)

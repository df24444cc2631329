"""SIGTERM/SIGHUP inside a run stop it as Ctrl-C does, and only inside it."""

from __future__ import annotations

import os
import signal

import pytest

from trainium_lens.cli.signals import stopping_on_signals
from trainium_lens.errors import Cancelled


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_inside_raises_cancelled_and_the_handler_before_comes_back(signum):
    seen = []
    before = signal.signal(signum, lambda s, _f: seen.append(s))
    try:
        with pytest.raises(Cancelled, match=f"stopped by {signal.Signals(signum).name}"):
            with stopping_on_signals():
                os.kill(os.getpid(), signum)
        os.kill(os.getpid(), signum)  # outside: the handler that was there before
        assert seen == [signum]
    finally:
        signal.signal(signum, before)

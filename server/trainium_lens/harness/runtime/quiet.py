"""Keep kineto's own log lines off the user's terminal (stdlib only).

torch's profiler (kineto, torch 2.13 at least) writes ``USDT:… profiler_start``
and ``profiler_stop`` to stderr each time a profile starts and stops: under
``trainium-lens run`` some 18 lines of the tool's making in the script's output.
kineto reads its threshold from ``KINETO_LOG_LEVEL`` once, when the first
profile of the process starts; 6 is above every level it has (USDT is 5, ERROR
4), so nothing is printed. Set before any profile starts, and only where the
user has not chosen a level: theirs wins (docs/scripts.md, "What the terminal
shows").
"""

from __future__ import annotations

import os

#: Above kineto's highest level (``ILoggerObserver.h``: USDT = 5).
SILENT = "6"


def quiet_kineto() -> None:
    if not os.environ.get("KINETO_LOG_LEVEL"):  # empty is kineto's default, not a choice
        os.environ["KINETO_LOG_LEVEL"] = SILENT

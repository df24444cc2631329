"""Standard output that a closed pipe ends quietly (``show RUN | head``).

Python ignores SIGPIPE, so a write to a pipe whose reader has gone raises
``BrokenPipeError`` — as a traceback mid-table, or at exit as "Exception
ignored ... BrokenPipeError" with status 120 when the last flush fails. Well-
behaved Unix tools just stop. ``emit`` stops writing, points stdout at
/dev/null (so the interpreter's final flush has somewhere to go) and tells the
caller, which returns the status it would have returned anyway: a closed pipe
changes no verdict (``check``'s 1 stays 1 under ``set -o pipefail``).
"""

from __future__ import annotations

import os
import sys


def silence_stdout() -> None:
    """Everything still buffered or written later on stdout goes to /dev/null."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no real stdout (embedded): nothing to do
        pass


def emit(text: str) -> bool:
    """Print ``text`` and flush; False (and stdout silenced) when the reader closed the pipe."""
    try:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        silence_stdout()
        return False
    return True

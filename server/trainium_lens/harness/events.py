"""The event stream: one JSON object per line on the *real* stdout.

User code may print, and C libraries may write to fd 1, so the harness keeps
a private duplicate of fd 1 for events, points fd 1 at stderr, and turns
Python-level user output into ``output`` events (whole lines, never mixed
with an event line). Files the harness leaves for its caller (batch.json, a
rank's result) are written whole or not at all (``write_json_atomic``).
"""

from __future__ import annotations

import errno
import io
import json
import math
import os
import sys
import threading
from typing import Any


class HarnessError(Exception):
    """A failure reported as an ``error`` event (kinds: docs/protocol.md).

    The fields and their order are shared with ``errors.HarnessError`` (the core's,
    which extends this class): ``(kind, message, file, line, traceback)``.
    """

    def __init__(
        self,
        kind: str,
        message: str,
        file: str | None = None,
        line: int | None = None,
        traceback: str | None = None,
    ):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.file = file
        self.line = line
        self.traceback = traceback


def _clean(value: Any) -> Any:
    """JSON has no NaN/inf: send them as null rather than invalid JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


class EventStream:
    def __init__(self, fd: int):
        self._out = os.fdopen(fd, "w", encoding="utf-8", errors="replace", closefd=True)
        self._lock = threading.Lock()

    def emit(self, event: str, **fields: Any) -> None:
        line = json.dumps(_clean({"event": event, **fields}), ensure_ascii=False)
        with self._lock:
            self._out.write(line + "\n")
            self._out.flush()

    def stage(self, stage: str, function: str | None, message: str, **extra: Any) -> None:
        self.emit("stage", stage=stage, function=function, message=message, **extra)

    def warning(self, message: str) -> None:
        self.emit("warning", message=message)


class _UserOutput(io.TextIOBase):
    """``sys.stdout`` while user code runs: each complete line → an ``output`` event."""

    def __init__(self, events: EventStream):
        self._events = events
        self._buf = ""
        self._lock = threading.Lock()

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        with self._lock:
            self._buf += text
            while "\n" in self._buf:
                line, self._buf = self._buf.split("\n", 1)
                self._events.emit("output", text=line)
        return len(text)

    def flush(self) -> None:
        with self._lock:
            if self._buf:
                self._events.emit("output", text=self._buf)
                self._buf = ""

    def fileno(self) -> int:  # code that writes to the fd directly lands on stderr
        return 2

    def isatty(self) -> bool:
        return False


def open_event_stream() -> EventStream:
    """Claim the real stdout for events; everything else written to fd 1 → stderr."""
    sys.stdout.flush()
    real = os.dup(1)
    os.dup2(2, 1)
    events = EventStream(real)
    sys.stdout = _UserOutput(events)
    return events


def write_json_atomic(
    path: str, data: Any, indent: int | None = None, compact: bool = False, allow_nan: bool = False
) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder,
    so a reader never sees half a file and a full disk leaves no temporary one.
    (A private temporary name per process: two runs may write one cache file.)"""
    tmp = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as handle:
            separators = (",", ":") if compact else None
            json.dump(data, handle, indent=indent, allow_nan=allow_nan, separators=separators)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def internal_failure(exc: BaseException) -> tuple[str, str]:
    """The error kind and one-line message for an exception nobody expected: a
    full disk is said as such (ENOSPC reads "[Errno 28]" otherwise, and where the
    run writes is not in it), anything else as what it is."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", -1)):
        what = "no space left on the disk" if exc.errno == errno.ENOSPC else "over the disk quota"
        where = f" writing {exc.filename}" if exc.filename else ""
        return (
            "disk_full",
            f"{what}{where}: the run's files (under the cache folder, TRAINIUM_LENS_CACHE, or the "
            "host's --work-dir) could not be written; free some space and run again",
        )
    return "internal", f"harness failed: {type(exc).__name__}: {exc}"

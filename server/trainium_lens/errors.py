"""Errors every layer shares. Each carries a one-line reason fit to show a user."""

from __future__ import annotations

from trainium_lens.harness.events import HarnessError as HarnessFailure


class LensError(Exception):
    """Base: ``str(err)`` is a one-line reason, ``exit_code`` what the CLI returns."""

    exit_code = 1


class UsageError(LensError):
    exit_code = 2


class HarnessError(LensError, HarnessFailure):
    """The harness reported an error event (bad file, user code raised, no torch...).

    The harness's own class (``harness/events.py``, which must not import the
    package) defines the fields and their order, ``(kind, message, file, line,
    traceback)``; this one adds the exit code and the reading of an ``error``
    event. ``kind`` is the event's kind (see docs/protocol.md); ``file``/
    ``line`` point at the user's code when the error is theirs.
    """

    exit_code = 3

    @classmethod
    def from_event(cls, event: dict) -> HarnessError:
        return cls(
            str(event.get("kind") or "internal"),
            str(event.get("message") or "the harness failed"),
            file=event.get("file"),
            line=event.get("line"),
            traceback=event.get("traceback"),
        )


class TargetError(LensError):
    """The target could not run the job: unreachable host, auth, host key, sync..."""

    exit_code = 4


class Cancelled(LensError):
    exit_code = 130


class TimedOut(LensError):
    exit_code = 124


class NotStored(LensError):
    """The run succeeded but its results could not be saved (a read-only or full
    disk): ``results`` still holds them, so the caller can show them."""

    def __init__(self, message: str, results: list) -> None:
        super().__init__(message)
        self.results = results

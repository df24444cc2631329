"""Errors every layer shares. Each carries a one-line reason fit to show a user."""

from __future__ import annotations

from trainium_lens.harness.events import HarnessError as HarnessFailure

#: The command line's one exit-code contract (README, every ``--help``).
EXIT_OK = 0
EXIT_REGRESSION = 1  # only ``check`` finding a regression or a failed finding gate
EXIT_USAGE = 2  # an unknown function, no marker, a file that does not parse, bad options, a missing file
EXIT_USER_CODE = 3  # the user's code failed
EXIT_CANNOT_RUN = 4  # the host or backend cannot run it
EXIT_TIMEOUT = 124
EXIT_CANCELLED = 130

#: What the harness's error kinds mean for the exit code (any other kind: 4).
HARNESS_KIND_CODES = {
    "parse": EXIT_USAGE,
    "no_marked_function": EXIT_USAGE,
    "unknown_function": EXIT_USAGE,
    "spec": EXIT_USAGE,
    "user_code": EXIT_USER_CODE,
    "inputs": EXIT_USER_CODE,
    "backend_unavailable": EXIT_CANNOT_RUN,
    "torch_missing": EXIT_CANNOT_RUN,
    "cancelled": EXIT_CANCELLED,  # SLURM cancelled the job (a scancel from outside: harness/nodes/slurm.py)
}


class LensError(Exception):
    """Base: ``str(err)`` is a one-line reason, ``exit_code`` what the CLI returns
    (never 1: that is a regression's, and a failure of the tool is not one)."""

    exit_code = EXIT_CANNOT_RUN


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

    @property
    def exit_code(self) -> int:  # type: ignore[override]
        return HARNESS_KIND_CODES.get(self.kind, EXIT_CANNOT_RUN)

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

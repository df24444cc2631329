"""One shape for a harness failure on both sides of the event stream."""

from __future__ import annotations

import inspect

import pytest

from trainium_lens.errors import HarnessError, LensError
from trainium_lens.harness import events


def test_the_core_error_is_the_harness_error_with_an_exit_code():
    # Same fields in the same order: a call written for one reads the same in the other.
    assert issubclass(HarnessError, events.HarnessError) and issubclass(HarnessError, LensError)
    assert inspect.signature(HarnessError) == inspect.signature(events.HarnessError)
    assert list(inspect.signature(HarnessError).parameters) == [
        "kind",
        "message",
        "file",
        "line",
        "traceback",
    ]
    for cls in (HarnessError, events.HarnessError):
        err = cls("inputs", "f() needs arguments", "m.py", 3)
        assert (err.kind, err.message, str(err), err.file, err.line) == (
            "inputs",
            "f() needs arguments",
            "f() needs arguments",
            "m.py",
            3,
        )
    codes = {
        k: HarnessError(k, "m").exit_code for k in ("parse", "unknown_function", "user_code", "torch_missing")
    }
    assert codes == {"parse": 2, "unknown_function": 2, "user_code": 3, "torch_missing": 4}


def test_an_error_event_becomes_the_core_error():
    event = {
        "event": "error",
        "kind": "user_code",
        "message": "ZeroDivisionError: division by zero",
        "file": "examples/m.py",
        "line": 12,
        "traceback": "Traceback ...",
    }
    err = HarnessError.from_event(event)
    assert (err.kind, err.message, err.file, err.line, err.traceback) == (
        "user_code",
        "ZeroDivisionError: division by zero",
        "examples/m.py",
        12,
        "Traceback ...",
    )
    # A bare event still reads as one line.
    bare = HarnessError.from_event({"event": "error"})
    assert (bare.kind, str(bare)) == ("internal", "the harness failed")
    with pytest.raises(LensError, match="division by zero"):
        raise err

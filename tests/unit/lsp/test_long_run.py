"""The words every long run's failures get (``lsp/long_run.describe``)."""

from __future__ import annotations

import pytest
from lsprotocol import types

from trainium_lens.errors import Cancelled, LensError, TargetError, TimedOut
from trainium_lens.lsp.long_run import describe

WORDS = {
    "cancelled": "stopped; kept",
    "timed_out": "run timed out",
    "target": "cannot run on h",
    "file": "a.py",
}


@pytest.mark.parametrize(
    "err, message, kind, level",
    [
        (Cancelled("x"), "stopped; kept", "cancelled", types.MessageType.Info),
        (TimedOut("after 5 s"), "run timed out: after 5 s", "timeout", types.MessageType.Error),
        (TargetError("unreachable"), "cannot run on h: unreachable", "target", types.MessageType.Error),
        (LensError("bad option"), "bad option", "usage", types.MessageType.Error),
        (
            PermissionError(13, "Permission denied"),
            "a.py: Permission denied",
            "usage",
            types.MessageType.Error,
        ),
        (KeyError("k"), "internal error: KeyError: 'k'", "internal", types.MessageType.Error),
    ],
    ids=["cancelled", "timeout", "target", "usage", "os", "bug"],
)
def test_each_error_is_one_line_of_its_kind(err, message, kind, level):
    failure = describe(err, **WORDS)
    assert (failure.message, failure.kind, failure.level) == (message, kind, level)

"""A script that stopped early is said in plain words: one step is "1 step"
(an error once read "after 1 steps")."""

from __future__ import annotations

import sys
from pathlib import Path

from trainium_lens.engine.script import ScriptRequest, explain
from trainium_lens.model import figures
from trainium_lens.model.script import ScriptCommand
from trainium_lens.targets.outcome import Outcome


def _req() -> ScriptRequest:
    return ScriptRequest(ScriptCommand([sys.executable, "train.py"], "python"), Path("."))


def test_plural_is_singular_for_exactly_one():
    assert figures.plural(1, "step") == "1 step" and figures.plural(2, "step") == "2 steps"
    assert figures.plural(2.333, "dispatch", "dispatches") == "2.33 dispatches"


def test_a_script_that_raised_after_one_step_says_one_step():
    raised = Outcome(
        1, [{"event": "raised", "message": "ValueError: x", "steps": 1, "file": "t.py", "line": 3}]
    )
    assert "after 1 step, before the window" in explain(raised, _req()).args[0]
    two = Outcome(1, [{"event": "raised", "message": "ValueError: x", "steps": 2}])
    assert "after 2 steps," in explain(two, _req()).args[0]


def test_a_script_that_ran_one_step_says_one_step():
    ran = Outcome(0, [{"event": "armed", "window": [0, 5]}, {"event": "exit", "steps": 1}])
    text = explain(ran, _req()).args[0]
    assert "the script ran 1 optimizer step;" in text, text

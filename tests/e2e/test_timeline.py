"""The built-in timeline in a real VS Code (code-server in headless Chromium).

A real CPU run of ``rms_norm_naive`` is made with the CLI into a fresh workspace;
the installed .vsix shows its hints, and ``timeline_driver.mjs`` does what a user
does: hover the hottest line, click "Open timeline", look at the panel (zoomed
on that line, its events highlighted; screenshots under test-results/e2e/), click
an event of another line and see the editor move there. Uses the editor e2e's
helpers (test_vscode.py): the .vsix build, code-server, the workspace settings.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from trainium_lens.traces.chrome import load_trace

from . import test_vscode
from .test_vscode import EXAMPLE, RESULTS, drive, hottest_line, installed_server, stored_run

pytestmark = test_vscode.pytestmark  # the e2e marker; skipped without code-server


@pytest.fixture(scope="module")
def timeline_session(tmp_path_factory):
    # The run the hover and the timeline show, in a workspace whose settings name
    # this interpreter.
    workspace, result = stored_run(tmp_path_factory.mktemp("vscode-timeline"))
    settings = workspace / ".vscode" / "settings.json"
    settings.write_text(
        json.dumps({**json.loads(settings.read_text()), "trainiumLens.python": sys.executable})
    )
    hot = hottest_line(result)
    obs, _ = drive(
        tmp_path_factory,
        "vscode-timeline-server",
        "timeline_driver.mjs",
        "timeline-observed.json",
        lambda home: (installed_server(home, workspace)[0], {"hotLine": hot}),
    )
    return obs, result, hot


def test_hover_link_opens_the_timeline_zoomed_on_the_line_with_its_events_highlighted(timeline_session):
    obs, result, hot = timeline_session
    assert "Open timeline" in obs["hover"]
    view = obs["view"]
    assert view["focus"] == [EXAMPLE, hot]
    assert view["lanes"][0] == "User lines" and "ATen ops" in view["lanes"]
    # Zoomed: the view holds the line's first range and is far narrower than the run.
    f = view["focusWindow"]
    assert view["ta"] <= f["start"] and view["tb"] >= f["end"]
    assert (view["tb"] - view["ta"]) < 0.5 * view["t1"]
    # Highlighted: every event of that line in the trace (its ranges and its ops).
    trace = load_trace(result.artifacts.trace)
    expected = len(trace.line_events(EXAMPLE, hot))
    assert expected >= 2 * result.totals.steps
    assert obs["highlighted"] == expected
    assert obs["status"] == f"{expected} events of {EXAMPLE}:{hot} highlighted"
    assert obs["view"]["events"] == len(trace.events)
    for shot in ("timeline.png", "timeline-panel.png"):
        assert (RESULTS / shot).stat().st_size > 10_000
    print(f"\nhover link → timeline drawn: {obs['openMs']} ms")


def test_clicking_an_event_moves_the_editor_to_its_line(timeline_session):
    obs, _result, hot = timeline_session
    clicked = obs["clicked"]
    assert clicked["name"].startswith("aten::")
    assert clicked["source"][0] == EXAMPLE and clicked["source"][1] != hot
    # the press the webview saw was on that event; a click that missed says what it hit
    assert clicked["hit"] == clicked["i"], obs["misses"]
    assert obs["cursorLine"] == clicked["source"][1], (obs["misses"], obs["log"])
    assert obs["activeEditor"].startswith(Path(EXAMPLE).stem), obs["misses"]  # the editor is active again

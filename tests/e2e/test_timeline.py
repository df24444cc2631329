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
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trainium_lens.result import load
from trainium_lens.trace_export import load_trace

from . import test_vscode
from .test_vscode import (
    EXAMPLE,
    FUNCTION,
    RESULTS,
    ROOT,
    CodeServer,
    build_vsix,
    failure_report,
    prepare,
    run_driver,
)

pytestmark = test_vscode.pytestmark  # the e2e marker; skipped without code-server


@pytest.fixture(scope="module")
def timeline_session(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("vscode-timeline")
    RESULTS.mkdir(parents=True, exist_ok=True)
    workspace, settings = prepare(tmp)
    (workspace / ".vscode" / "settings.json").write_text(
        json.dumps({**settings, "trainiumLens.python": sys.executable}))
    # The run the hover and the timeline show: the real profiler, through the CLI.
    env = {**os.environ, "PYTHONPATH": str(ROOT / "server"), "OMP_NUM_THREADS": "1",
           "TRAINIUM_LENS_CACHE": str(tmp / "cache")}
    out = tmp / "run.json"
    subprocess.run([sys.executable, "-m", "trainium_lens", "profile", str(workspace / EXAMPLE),
                    FUNCTION, "--workspace", str(workspace), "--active", "3", "--json", str(out)],
                   env=env, check=True, capture_output=True, timeout=240)
    result = load(out)
    vsix = build_vsix()
    source = (workspace / EXAMPLE).read_text().splitlines()
    hot = max((s for s in result.lines if s.file == EXAMPLE), key=lambda s: s.self_time_us)
    failures = []
    for attempt in range(1, test_vscode.ATTEMPTS + 1):  # see test_vscode.ATTEMPTS
        home = tmp_path_factory.mktemp("vscode-timeline-server")
        server = CodeServer(home, workspace)
        server.install(vsix)
        config = {
            "url": server.start(),
            "file": EXAMPLE,
            "hotLine": hot.line,
            "lineTexts": {str(i + 1): text.strip() for i, text in enumerate(source) if text.strip()},
            "shots": str(RESULTS),
        }
        done, obs = run_driver("timeline_driver.mjs", home, config,
                               RESULTS / "timeline-observed.json", server)
        if done.returncode == 0:
            break
        failures.append(failure_report(attempt, home, done, obs))
    else:
        pytest.fail("\n\n".join(failures))
    return obs, result, hot


def test_hover_link_opens_the_timeline_zoomed_on_the_line_with_its_events_highlighted(
        timeline_session):
    obs, result, hot = timeline_session
    assert "Open timeline" in obs["hover"]
    view = obs["view"]
    assert view["focus"] == [EXAMPLE, hot.line]
    assert view["lanes"][0] == "User lines" and "ATen ops" in view["lanes"]
    # Zoomed: the view holds the line's first range and is far narrower than the run.
    f = view["focusWindow"]
    assert view["ta"] <= f["start"] and view["tb"] >= f["end"]
    assert (view["tb"] - view["ta"]) < 0.5 * view["t1"]
    # Highlighted: every event of that line in the trace (its ranges and its ops).
    trace = load_trace(result.artifacts.trace)
    expected = len(trace.line_events(EXAMPLE, hot.line))
    assert expected >= 2 * result.totals.steps
    assert obs["highlighted"] == expected
    assert obs["status"] == f"{expected} events of {EXAMPLE}:{hot.line} highlighted"
    assert obs["view"]["events"] == len(trace.events)
    for shot in ("timeline.png", "timeline-panel.png"):
        assert (RESULTS / shot).stat().st_size > 10_000
    print(f"\nhover link → timeline drawn: {obs['openMs']} ms")


def test_clicking_an_event_moves_the_editor_to_its_line(timeline_session):
    obs, _result, hot = timeline_session
    clicked = obs["clicked"]
    assert clicked["name"].startswith("aten::")
    assert clicked["source"][0] == EXAMPLE and clicked["source"][1] != hot.line
    assert obs["cursorLine"] == clicked["source"][1]
    assert obs["activeEditor"].startswith(Path(EXAMPLE).stem)  # the editor is active again

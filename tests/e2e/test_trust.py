"""Workspace Trust in a real VS Code: code-server with trust on (no
``--disable-workspace-trust``) opens a folder nobody trusted, holding a stored
run. The hints of that run show (reading results runs nothing), while "Profile
on Trainium" and "Open Line in Neuron Explorer" are refused with a message that
says why, and nothing runs: no new run is stored.

The folder's own settings name an interpreter that does not exist; in Restricted
Mode VS Code withholds them (package.json's restrictedConfigurations), so the
server starts with the user's interpreter and the hints still come.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from trainium_lens.result import load

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
def restricted_session(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("vscode-trust")
    RESULTS.mkdir(parents=True, exist_ok=True)
    workspace, _settings = prepare(tmp)  # its .vscode/settings.json names a missing interpreter
    # The user's own settings (trusted): their interpreter, and no trust prompt,
    # so the folder simply opens in Restricted Mode.
    user_settings = tmp / "user-data" / "User" / "settings.json"
    user = json.loads(user_settings.read_text())
    user.update({"trainiumLens.python": sys.executable,
                 "security.workspace.trust.enabled": True,
                 "security.workspace.trust.startupPrompt": "never"})
    # The stored run: the real profiler, through the CLI.
    env = {**os.environ, "PYTHONPATH": str(ROOT / "server"), "OMP_NUM_THREADS": "1",
           "TRAINIUM_LENS_CACHE": str(tmp / "cache")}
    out = tmp / "run.json"
    subprocess.run([sys.executable, "-m", "trainium_lens", "profile", str(workspace / EXAMPLE),
                    FUNCTION, "--workspace", str(workspace), "--active", "3", "--json", str(out)],
                   env=env, check=True, capture_output=True, timeout=240)
    result = load(out)
    runs = workspace / ".trainium-lens" / "runs"
    stored = sorted(p.name for p in runs.iterdir())
    vsix = build_vsix()
    source = (workspace / EXAMPLE).read_text().splitlines()
    hot = max((s for s in result.lines if s.file == EXAMPLE), key=lambda s: s.self_time_us)
    failures = []
    for attempt in range(1, test_vscode.ATTEMPTS + 1):  # see test_vscode.ATTEMPTS
        home = tmp_path_factory.mktemp("vscode-trust-server")
        (home / "user-data" / "User").mkdir(parents=True)
        (home / "user-data" / "User" / "settings.json").write_text(json.dumps(user))
        server = CodeServer(home, workspace, workspace_trust=True)
        server.install(vsix)
        config = {
            "url": server.start(),
            "file": EXAMPLE,
            "defText": f"def {FUNCTION}(",
            "hotLine": hot.line,
            "lineTexts": {str(i + 1): text.strip() for i, text in enumerate(source) if text.strip()},
            "shots": str(RESULTS),
        }
        done, obs = run_driver("trust_driver.mjs", home, config, RESULTS / "trust-observed.json", server)
        if done.returncode == 0:
            break
        failures.append(failure_report(attempt, home, done, obs))
    else:
        pytest.fail("\n\n".join(failures))
    return obs, result, stored, sorted(p.name for p in runs.iterdir())


def test_an_untrusted_folder_shows_its_stored_hints(restricted_session):
    obs, result, _stored, _after = restricted_session
    assert obs["restrictedIndicator"] >= 1  # VS Code says the window is in Restricted Mode
    profiled = [s for s in result.lines if s.file == EXAMPLE and (s.self_time_us or s.total_time_us) > 0]
    assert len(obs["hintLines"]) == len(profiled) > 0
    assert all("⏱" in line and " cpu" in line for line in obs["hintLines"])


def test_an_untrusted_folder_refuses_profiling_and_explorer_saying_why(restricted_session):
    obs, _result, stored, after = restricted_session
    assert "profiling is off in Restricted Mode: it runs this workspace's code" in obs["profileRefusal"]
    assert "Trust the workspace" in obs["profileRefusal"]
    assert "Neuron Explorer is off in Restricted Mode" in obs["explorerRefusal"]
    assert after == stored  # nothing ran: no new run
    # ...and nothing failed on the way (the workspace's bad interpreter was never used).
    assert not [n for n in obs["notifications"] if "cannot start" in n or "failed" in n], obs["notifications"]

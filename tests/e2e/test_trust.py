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
import sys

import pytest

from . import test_vscode
from .test_vscode import EXAMPLE, FUNCTION, drive, hottest_line, installed_server, stored_run

pytestmark = test_vscode.pytestmark  # the e2e marker; skipped without code-server


@pytest.fixture(scope="module")
def restricted_session(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("vscode-trust")
    # Its .vscode/settings.json names a missing interpreter.
    workspace, result = stored_run(tmp)
    runs = workspace / ".trainium-lens" / "runs"
    stored = sorted(p.name for p in runs.iterdir())
    # The user's own settings (trusted): their interpreter, and no trust prompt,
    # so the folder simply opens in Restricted Mode.
    user = json.loads((tmp / "user-data" / "User" / "settings.json").read_text())
    user.update(
        {
            "trainiumLens.python": sys.executable,
            "security.workspace.trust.enabled": True,
            "security.workspace.trust.startupPrompt": "never",
        }
    )

    def start(home):
        (home / "user-data" / "User").mkdir(parents=True)
        (home / "user-data" / "User" / "settings.json").write_text(json.dumps(user))
        server, _ = installed_server(home, workspace, workspace_trust=True)
        return server, {"defText": f"def {FUNCTION}(", "hotLine": hottest_line(result)}

    obs, _ = drive(tmp_path_factory, "vscode-trust-server", "trust_driver.mjs", "trust-observed.json", start)
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

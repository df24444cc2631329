"""Workspace Trust on the server: told ``trusted: false`` (VS Code's Restricted
Mode), it still serves the stored results but runs nothing: no profile, no
Neuron Explorer, each refused in one line that says why, the reply the client
shows as it is. Real server over LSP."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
from lsprotocol import types

from tests.conftest import ROOT
from tests.integration.lsp.test_features import LINES, SOURCE
from tests.support.lsp_client import hints, hover, make_result, open_doc, request, start, stop, until
from trainium_lens.lsp.workspace_trust import EXPLORER_REFUSED, PROFILE_REFUSED
from trainium_lens.model.store import RunStore

ESBUILD = ROOT / "node_modules" / ".bin" / "esbuild"
DRIVER = """
const { refusalText } = require(process.argv[1]);
const reply = JSON.parse(require("node:fs").readFileSync(0, "utf8"));
process.stdout.write(JSON.stringify(refusalText(reply) ?? null));
"""


def client_refusal(tmp_path, reply: Any) -> str | None:
    """What the client shows for the server's ``reply``: its own code
    (extension/src/trustPolicy.ts, bundled with esbuild, run by node)."""
    bundle = tmp_path / "trust.cjs"
    if not bundle.exists():
        if not ESBUILD.exists():
            pytest.fail("run 'npm ci' first: the client's code is bundled with esbuild")
        built = subprocess.run(
            [
                ESBUILD,
                ROOT / "extension/src/trustPolicy.ts",
                "--bundle",
                "--platform=node",
                f"--outfile={bundle}",
            ],
            capture_output=True,
            text=True,
        )
        assert built.returncode == 0, built.stderr
    done = subprocess.run(
        ["node", "-e", DRIVER, bundle], input=json.dumps(reply), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def untrusted(**extra) -> dict:
    return {"settings": {"trainiumLens": {"trusted": False, **extra}}}


async def test_restricted_mode_shows_stored_results_and_runs_nothing(tmp_path):
    (tmp_path / "mod.py").write_text(SOURCE)
    RunStore(tmp_path).save(make_result("mod.py", "f", 5, LINES))
    runs_before = sorted((tmp_path / ".trainium-lens" / "runs").iterdir())
    # A workspace that names an interpreter which would run if anything ran.
    marker = tmp_path / "ran"
    evil = tmp_path / "evil-python"
    evil.write_text(f"#!/bin/sh\ntouch {marker}\n")
    evil.chmod(0o755)
    client = await start(tmp_path, options=untrusted(python=str(evil), explorer={"path": str(evil)}))
    try:
        uri = open_doc(client, tmp_path / "mod.py")
        # What is stored still shows.
        assert sorted(await hints(client, uri)) == [5, 6, 7]
        assert "aten::mean" in (await hover(client, uri, 7) or "")
        data = await request(client, "trainiumLens/runData", {"uri": uri})
        assert data["result"]["function"]["name"] == "f"

        reply = await client.workspace_execute_command_async(
            types.ExecuteCommandParams(
                command="trainiumLens.profile", arguments=[{"uri": uri, "function": "f"}]
            )
        )
        assert reply == {"run_ids": [], "error": PROFILE_REFUSED, "kind": "untrusted"}
        profile_reply = reply
        reply = await client.workspace_execute_command_async(
            types.ExecuteCommandParams(
                command="trainiumLens.openExplorer", arguments=[{"uri": uri, "line": 7}]
            )
        )
        assert reply == {"error": EXPLORER_REFUSED, "kind": "untrusted"}
        # The reply is the refusal, which the client shows (its own words: none): the
        # server shows nothing itself, so the user reads it once.
        assert [client_refusal(tmp_path, r) for r in (profile_reply, reply)] == [
            PROFILE_REFUSED,
            EXPLORER_REFUSED,
        ]
        assert client.messages == []
        assert "Restricted Mode" in PROFILE_REFUSED and "runs this workspace's code" in PROFILE_REFUSED
        assert not marker.exists()  # nothing the workspace named ran
        assert sorted((tmp_path / ".trainium-lens" / "runs").iterdir()) == runs_before

        # Trust granted (the client sends its settings again): the command is no longer refused.
        client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(settings={"trainiumLens": {"trusted": True}})
        )

        async def answer() -> Any:
            return await client.workspace_execute_command_async(
                types.ExecuteCommandParams(
                    command="trainiumLens.profile", arguments=[{"uri": uri, "line": 0}]
                )
            )

        async def trusted() -> bool:  # a refusal until the server has read the new settings
            return (await answer())["kind"] != "untrusted"

        await until(trusted, "the command no longer refused")
        reply = await answer()
        assert reply["kind"] == "usage" and "not inside a marked function" in reply["error"]
    finally:
        await stop(client)

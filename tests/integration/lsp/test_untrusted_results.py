"""A crafted result committed in a workspace, opened in the real language server
(pytest-lsp) in Restricted Mode, as a cloned repository would be: its strings show
as text (no image loads, no link but the server's own), its trace is not fetched
(no SSH connection is even attempted), an id that climbs out of the workspace is
refused, and nothing outside the workspace changes. A rejected host setting
refuses to run instead of running here."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from urllib.parse import unquote

from lsprotocol import types

from tests.integration.lsp.test_features import LINES, SOURCE
from tests.support.lsp_client import hover, lenses, make_result, open_doc, request, start, stop, until
from trainium_lens.model.result import Artifacts, Finding
from trainium_lens.model.store import RunStore

PIXEL = "![x](https://evil.example/pixel.png)"
LINK = "[Open timeline](command:trainiumLens.openTimeline?%5B%7B%22uri%22%3A%22file%3A%2F%2F%2Fetc%22%7D%5D)"


def crafted(tmp: Path) -> tuple[Path, Path]:
    """(workspace, victim): a repository holding a crafted result, and a folder
    outside it the result aims at."""
    victim = tmp / "victim"
    victim.mkdir()
    (victim / "id_ed25519").write_text("secret\n")
    ws = tmp / "repo"
    ws.mkdir()
    (ws / "mod.py").write_text(SOURCE)
    result = make_result(
        "mod.py",
        "f",
        5,
        LINES,
        findings=[
            Finding(
                kind="dispatches",
                severity="hint",
                file="mod.py",
                line=8,
                message=f"{PIXEL} {LINK}",
                fix=PIXEL,
            )
        ],
    )
    result.host = f"<img src=https://evil.example/h.png> {LINK}"
    result.lines[0].ops[0].name = f"aten::mean` {PIXEL} `"
    # Fetching this trace from the "host" would have replaced ~/.ssh before: the
    # host is reachable by name, the trace a folder on it.
    result.artifacts = Artifacts(location="lens-test", run_dir="/", trace=str(victim))
    RunStore(ws).save(result)
    climbing = json.loads(result.to_json())
    climbing["run_id"] = "../../victim"
    (ws / ".trainium-lens" / "runs" / "climbing.json").write_text(json.dumps(climbing))
    return ws, victim


async def test_a_crafted_result_in_restricted_mode_is_only_text(tmp_path):
    import markdown_it

    ws, victim = crafted(tmp_path)
    control = tmp_path / "cm"
    control.mkdir(mode=0o700)
    client = await start(
        ws,
        options={"settings": {"trainiumLens": {"trusted": False}}},
        env={"TRAINIUM_LENS_SSH_CONTROL_DIR": str(control)},
    )
    try:
        uri = open_doc(client, ws / "mod.py")
        text = await hover(client, uri, 7)
        assert text is not None
        rendered = markdown_it.MarkdownIt("commonmark").enable("table").render(text)
        assert "<img" not in rendered
        hrefs = re.findall(r'href="([^"]*)"', rendered)
        assert len(hrefs) == 1 and hrefs[0].startswith("command:trainiumLens.openTimeline?")  # the server's
        (args,) = json.loads(unquote(hrefs[0].split("?", 1)[1]))
        assert args == {"uri": uri, "line": 7}
        assert "evil.example/pixel.png" in rendered  # shown, as text
        # The timeline's lens still shows; opening it reads nothing from a host.
        assert any(
            lens.command and lens.command.command == "trainiumLens.openTimeline"
            for lens in await lenses(client, uri)
        )
        reply = await request(client, "trainiumLens/timeline", {"uri": uri, "line": 7})
        assert "Restricted Mode" in reply["error"], reply  # answered: nothing left to happen
        assert sorted(p.name for p in control.iterdir()) == []  # no SSH master, not even tried
        assert sorted(p.name for p in victim.iterdir()) == ["id_ed25519"]
        assert (victim / "id_ed25519").read_text() == "secret\n"
        assert not (ws / ".trainium-lens" / "artifacts").exists()
    finally:
        await stop(client)


async def test_a_rejected_host_setting_runs_nothing_here(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    marker = tmp_path / "ran"
    touch = f"import pathlib\npathlib.Path({str(marker)!r}).touch()\n"
    (ws / "mod.py").write_text(touch + "\n\n# trainium: profile\ndef f():\n    return 1\n")
    client = await start(ws, options={"trainiumLens": {"host": "-oProxyCommand=touch /tmp/x"}})
    try:
        uri = open_doc(client, ws / "mod.py")
        reply = await client.workspace_execute_command_async(
            types.ExecuteCommandParams(
                command="trainiumLens.profile", arguments=[{"uri": uri, "function": "f"}]
            )
        )
        assert reply["run_ids"] == [] and reply["kind"] == "settings", reply
        assert "trainiumLens.host" in reply["error"]
        await until(lambda: any("no fallback" in m.message for m in client.messages), "the refusal's message")
        assert not marker.exists()
        assert not (ws / ".trainium-lens").exists()
    finally:
        await stop(client)


async def test_store_entries_that_are_devices_never_stop_the_server(tmp_path):
    """Before: `runs/x.json -> /dev/stdin` made the server read its own input and
    stop answering; `-> /dev/zero` read until the OOM killer."""
    ws, _victim = crafted(tmp_path)
    runs = ws / ".trainium-lens" / "runs"
    (runs / "stdin.json").symlink_to("/dev/stdin")
    (runs / "zero.json").symlink_to("/dev/zero")
    os.mkfifo(runs / "fifo.json")
    client = await start(ws, options={"settings": {"trainiumLens": {"trusted": False}}})
    try:
        uri = open_doc(client, ws / "mod.py")
        text = await hover(client, uri, 7)  # answered: the store was read past them
        assert text is not None and "µs" in text
        assert await lenses(client, uri)
    finally:
        await stop(client)

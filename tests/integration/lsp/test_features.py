"""The language server's features over real LSP, from stored results.

The server runs as a subprocess (pytest-lsp); the results are synthetic but
stored through the real ``RunStore``, as a profile run leaves them, so these
tests need no torch and check rendering, line tracking, restart and settings.
The end-to-end runs with real torch are in integration/lsp/test_profile_run.py.
"""

from __future__ import annotations

import sys
import textwrap

import pytest
from lsprotocol import types

from tests.support.lsp_client import (
    change,
    hints,
    hover,
    lenses,
    make_result,
    open_doc,
    request,
    start,
    stop,
    until,
)
from trainium_lens.model.result import Finding
from trainium_lens.model.store import RunStore

SOURCE = textwrap.dedent("""\
    import torch


    # trainium: profile
    def f():
        x = torch.ones(4, 4)
        y = x * x
        z = y.mean() + y.sum()
        return z
""")
# line (1-based) -> (text, self µs, ops)
LINES = {
    6: ("    x = torch.ones(4, 4)", 10.0, [("aten::ones", 1, 10.0)]),
    7: ("    y = x * x", 30.0, [("aten::mul", 1, 30.0)]),
    8: (
        "    z = y.mean() + y.sum()",
        60.0,
        [("aten::mean", 1, 25.0), ("aten::sum", 1, 20.0), ("aten::add", 1, 15.0)],
    ),
}


@pytest.fixture
def workspace(tmp_path):
    (tmp_path / "mod.py").write_text(SOURCE)
    finding = Finding(
        kind="dispatches", severity="hint", file="mod.py", line=8, message="3 dispatches on this line"
    )
    RunStore(tmp_path).save(make_result("mod.py", "f", 5, LINES, findings=[finding]))
    return tmp_path


@pytest.fixture
async def client(workspace):
    client = await start(workspace)
    yield client
    await stop(client)


async def test_hints_hover_lens_heat_diagnostics_from_the_store(client, workspace):
    uri = open_doc(client, workspace / "mod.py")
    shown = await hints(client, uri)
    assert sorted(shown) == [5, 6, 7]  # 0-based: the stored lines 6, 7, 8
    assert shown[7] == "⏱ 60 µs cpu · 60% · 3 ops"
    assert shown[5] == "⏱ 10 µs cpu · 10% · 1 op"

    text = await hover(client, uri, 7)
    assert "| `aten::mean` | 1 | 25 µs cpu | 25 µs |" in text
    assert "spread over 5 steps: 54 µs–72 µs" in text
    assert "3 dispatches on this line" in text
    assert "command:trainiumLens.openTimeline?" in text
    assert "trace time: 1008–1013 µs (1 window" in text
    assert await hover(client, uri, 4) is None  # the def line has no figure

    shown_lenses = await lenses(client, uri)
    titles = [lens.command.title for lens in shown_lenses]
    # The timeline lens opens the hottest line (0-based 7: the stored line 8, 60 µs).
    assert titles == ["▶ Profile on Trainium", "100 µs cpu · 5 dispatches · 1 finding", "Timeline (line 8)"]
    assert shown_lenses[2].command.command == "trainiumLens.openTimeline"
    assert list(shown_lenses[2].command.arguments or []) == [{"uri": uri, "line": 7}]

    reply = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(
            command="trainiumLens.compareWithPrevious", arguments=[{"uri": uri, "function": "f"}]
        )
    )
    assert reply == {"error": "f has 1 run: profile it again to compare"}
    assert (await request(client, "trainiumLens/runData", {"uri": "untitled:1"}))["result"] is None

    await until(lambda: client.messages, "the compare error shown")
    await until(lambda: client.diagnostics.get(uri), "diagnostics published")
    await until(lambda: any(h["uri"] == uri for h in client.heat), "heat sent")
    assert [m.message for m in client.messages] == ["Trainium Lens: " + reply["error"]]
    diag = client.diagnostics[uri]
    assert [(d.range.start.line, d.source, d.severity, d.code) for d in diag] == [
        (7, "Trainium Lens", types.DiagnosticSeverity.Hint, "dispatches")
    ]
    heat = [h for h in client.heat if h["uri"] == uri][-1]
    assert {h["line"]: h["intensity"] for h in heat["lines"]} == {5: 0.1667, 6: 0.5, 7: 1.0}


async def test_hints_follow_edits_and_go_stale(client, workspace):
    uri = open_doc(client, workspace / "mod.py")
    assert sorted(await hints(client, uri)) == [5, 6, 7]
    # Two lines inserted above the function: every hint moves down two lines.
    change(client, uri, 2, (3, 0), (3, 0), "# a\n# b\n")
    shown = await hints(client, uri)
    assert sorted(shown) == [7, 8, 9]
    assert not any("stale" in label for label in shown.values())
    # Edit the `y = x * x` line (now line 8): its hint is stale, the others not.
    change(client, uri, 3, (8, 8), (8, 13), "x + x")
    shown = await hints(client, uri)
    assert shown[8].endswith("(stale)") and "stale" not in shown[9]
    await until(lambda: client.heat[-1]["version"] == 3, "heat for the edit (version 3)")
    assert [h["stale"] for h in client.heat[-1]["lines"] if h["line"] == 8] == [True]
    # Undo: the line reads as profiled again, so the hint is fresh again.
    change(client, uri, 4, (8, 8), (8, 13), "x * x")
    assert "stale" not in (await hints(client, uri))[8]
    # Delete the inserted lines: back where they were.
    change(client, uri, 5, (3, 0), (5, 0), "")
    assert sorted(await hints(client, uri)) == [5, 6, 7]
    # Delete the annotated `x = ...` line: its hint goes, the next ones move up.
    change(client, uri, 6, (5, 0), (6, 0), "")
    shown = await hints(client, uri)
    assert sorted(shown) == [5, 6] and shown[5].startswith("⏱ 30 µs")
    await until(lambda: client.heat[-1]["version"] == 6, "heat for the deletion (version 6)")
    assert [h["line"] for h in client.heat[-1]["lines"]] == [5, 6]
    await until(lambda: [d.range.start.line for d in client.diagnostics[uri]] == [6], "the finding moved up")


async def test_a_run_stored_by_the_cli_shows_without_reopening(client, workspace):
    uri = open_doc(client, workspace / "mod.py")
    assert (await hints(client, uri))[6] == "⏱ 30 µs cpu · 30% · 1 op"
    slower = dict(LINES)
    slower[7] = (LINES[7][0], 90.0, LINES[7][2])
    RunStore(workspace).save(
        make_result(
            "mod.py", "f", 5, slower, run_id="20261129-121500-cccc-0", created_at="2026-11-29T12:15:00Z"
        )
    )
    assert (await hints(client, uri))[6] == "⏱ 90 µs cpu · 56% · 1 op · ▲ 200%"


async def test_restart_brings_hints_back_and_delta_against_previous(client, workspace):
    uri = open_doc(client, workspace / "mod.py")
    before = await hints(client, uri)
    await stop(client)
    # A second run of f, faster on the mul line, stored while the server was down.
    faster = dict(LINES)
    faster[7] = (LINES[7][0], 15.0, LINES[7][2])
    RunStore(workspace).save(
        make_result(
            "mod.py", "f", 5, faster, run_id="20261129-111500-bbbb-0", created_at="2026-11-29T11:15:00Z"
        )
    )
    again = await start(workspace)
    try:
        uri = open_doc(again, workspace / "mod.py")
        after = await hints(again, uri)
        assert sorted(after) == sorted(before)
        assert after[6].endswith("▼ 50%")
        assert "previous run: 30 µs → 15 µs cpu (▼ 50%)" in await hover(again, uri, 6)
        titles = [lens.command.title for lens in await lenses(again, uri)]
        assert "Compare with previous" in titles
        compared = await again.workspace_execute_command_async(
            types.ExecuteCommandParams(
                command="trainiumLens.compareWithPrevious", arguments=[{"uri": uri, "function": "f"}]
            )
        )
        assert compared["diff"]["before"] == "20261129-101500-aaaa-0"
        assert "| 7 | `y = x * x` | 30 µs | 15 µs | ▼ 50% |" in compared["markdown"]
        data = await request(again, "trainiumLens/runData", {"uri": uri})
        assert data["result"]["run_id"] == "20261129-111500-bbbb-0"
        assert data["diff"]["after"] == "20261129-111500-bbbb-0"
        assert {row["line"]: row["current"] for row in data["lines"]} == {6: 5, 7: 6, 8: 7}
    finally:
        await stop(again)


async def hints_at(client, uri: str, lines: list[int]) -> bool:
    return sorted(await hints(client, uri)) == lines


async def test_invalid_settings_are_named_and_defaults_used(workspace):
    client = await start(
        workspace, options={"trainiumLens": {"backend": "tpu", "historySize": 0, "hintThreshold": "50us"}}
    )
    try:
        uri = open_doc(client, workspace / "mod.py")
        await until(lambda: len(client.messages) >= 2, "a warning per invalid setting")
        messages = [m.message for m in client.messages]
        assert any(
            "trainiumLens.backend" in m and "'tpu'" in m and "default (auto)" in m for m in messages
        ), messages
        assert any("trainiumLens.historySize" in m for m in messages)
        # The valid one applied: the 10 µs and 30 µs lines are below 50 µs.
        assert sorted(await hints(client, uri)) == [7]
        client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(settings={"trainiumLens": {"hintThreshold": 0.2}})
        )
        # 30% and 60% pass 20%
        await until(lambda: hints_at(client, uri, [6, 7]), "hints above the new threshold")
    finally:
        await stop(client)


async def test_variants_of_a_file_compare_and_bad_requests_are_refused(workspace):
    # A second marked function in the file, with its own stored run.
    source = SOURCE + textwrap.dedent("""\


        # trainium: profile
        def g():
            return torch.ones(4, 4).sum()
    """)
    (workspace / "mod.py").write_text(source)
    RunStore(workspace).save(
        make_result(
            "mod.py",
            "g",
            14,
            {15: ("    return torch.ones(4, 4).sum()", 40.0, [("aten::sum", 1, 40.0)])},
            run_id="20261129-101500-aaaa-1",
        )
    )
    # ``trainium-lens lsp`` is the same server as ``python -m trainium_lens.lsp``.
    client = await start(workspace, command=[sys.executable, "-m", "trainium_lens", "lsp"])
    try:
        uri = open_doc(client, workspace / "mod.py")
        reply = await client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="trainiumLens.compareWithPrevious", arguments=[{"uri": uri}])
        )
        rows = reply["comparison"]["rows"]
        # CPU time is profiled: the speedup is the unprofiled walls' (110 µs against 44 µs)
        assert [r["variant"] for r in rows] == ["f", "g"] and rows[1]["speedup"] == pytest.approx(2.5)
        assert reply["comparison"]["speedup_basis"] == "unprofiled wall median"
        assert "| g | 44 µs | 2.5× | 40 µs cpu |" in reply["markdown"]
        assert "fastest: **g** (unprofiled wall median)" in reply["markdown"]
        data = await request(client, "trainiumLens/runData", {"uri": uri, "function": "g"})
        assert data["result"]["function"]["name"] == "g" and data["diff"] is None
        assert data["mostly_fit"] is None  # no fit block: nothing fitted to say (model/fit.py)
        assert len(data["comparison"]["rows"]) == 2
        # Requests that cannot run: answered with the reason, nothing started.
        for arg, words in (
            ({"uri": uri, "line": 1}, "line 2 of mod.py is not inside a marked"),
            ({"uri": uri, "function": "h"}, "'h' is not a marked function"),
            ({"uri": (workspace / "nope.py").as_uri()}, "nope.py is not saved"),
            ({"function": "f"}, "takes one argument"),
        ):
            reply = await client.workspace_execute_command_async(
                types.ExecuteCommandParams(command="trainiumLens.profile", arguments=[arg])
            )
            assert words in reply["error"] and reply["run_ids"] == [], reply
        await until(lambda: len(client.messages) >= 4, "a message per refused request")
        assert len(client.messages) == 4
        assert all(m.type == types.MessageType.Error for m in client.messages)
    finally:
        await stop(client)

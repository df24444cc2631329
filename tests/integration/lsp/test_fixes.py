"""Quick fixes over LSP, real server: a finding that carries an edit gets a
"Measure and apply" code action; its command measures the fix with the real
harness (progress, cancellable), shows the result and a preview, and the edit
reaches the client only when the fix held and the user chose Apply. Refused in
Restricted Mode; refused when the file changed since the run."""

from __future__ import annotations

import ast
import re
from typing import Any

from lsprotocol import types

from tests.integration.cli.test_fix import FILE
from tests.support.lsp_client import hints, make_result, open_doc, start, stop
from trainium_lens.analysis.fixes.rmsnorm import rms_norm_edit
from trainium_lens.harness.markers import source_lines
from trainium_lens.lsp.features.fixes import REFUSED
from trainium_lens.model.result import Finding, FunctionRef, Protocol
from trainium_lens.model.store import RunStore

DEF = source_lines(FILE).index("def infer(x):") + 1


def stored(ws) -> Finding:
    (ws / "model.py").write_text(FILE)
    edit = rms_norm_edit(FILE, "model.py", [14, 15, 16], "infer")
    assert edit is not None
    finding = Finding("fused_op", "info", "model.py", 14, "lines 14–16 compute RMSNorm op by op", edit=edit)
    text = source_lines(FILE)
    # the ops the RMSNorm lines dispatch: the builder derives the same edit from them
    # (a stored edit is used only when it is the one the builder writes)
    ops = {
        14: [("aten::pow", 1, 5.0), ("aten::mean", 1, 5.0)],
        15: [("aten::add", 1, 5.0), ("aten::rsqrt", 1, 5.0), ("aten::mul", 1, 5.0)],
        16: [("aten::mul", 1, 5.0)],
    }
    lines = {n: (text[n - 1].strip(), 10.0, ops[n]) for n in (14, 15, 16)}
    result = make_result("model.py", "infer", DEF, lines, findings=[finding])
    result.function = FunctionRef(
        file="model.py", name="infer", line=DEF, marker_line=DEF - 1, inputs="make_tokens",
        protocol=Protocol(wait=0, warmup=1, active=1, timing_calls=10),
    )  # fmt: skip
    RunStore(ws).save(result)
    return finding


async def actions(client, uri: str, line: int) -> list[types.CodeAction]:
    got = await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=types.Range(start=types.Position(line, 0), end=types.Position(line, 0)),
            context=types.CodeActionContext(diagnostics=[]),
        )
    )
    out = []
    for a in got or []:
        # pytest-lsp's converter tries Command first in ``Command | CodeAction`` and keeps a
        # CodeAction's command object as that Command's string: read it back as sent
        if isinstance(a, types.Command) and a.command.startswith("{"):
            sent = ast.literal_eval(a.command)
            command = types.Command(
                title=sent["title"], command=sent["command"], arguments=sent.get("arguments")
            )
            a = types.CodeAction(title=a.title, kind=types.CodeActionKind.QuickFix, command=command)
            out.append((a, True))
        elif isinstance(a, types.CodeAction):
            out.append((a, a.edit is None))
    assert all(no_edit for _a, no_edit in out)  # an action never carries the edit: measured first
    return [a for a, _ in out]


async def test_quick_fix_measures_then_applies_only_on_accept(tmp_path):
    stored(tmp_path)
    client = await start(tmp_path)
    asked: list[str] = []
    edits: list[Any] = []

    @client.feature(types.WINDOW_SHOW_MESSAGE_REQUEST)
    def on_request(params: types.ShowMessageRequestParams) -> types.MessageActionItem:
        asked.append(params.message)
        return types.MessageActionItem(title="Apply")

    @client.feature(types.WORKSPACE_APPLY_EDIT)
    def on_edit(params: types.ApplyWorkspaceEditParams) -> types.ApplyWorkspaceEditResult:
        # as VS Code does: the document changes (didChange) before the reply
        edits.append(params.edit)
        uri, (text_edit,) = next(iter(params.edit.changes.items()))
        lines = source_lines(FILE, keepends=True)
        a, b = text_edit.range.start, text_edit.range.end  # ASCII: UTF-16 columns are characters
        applied = (
            "".join(lines[: a.line])
            + lines[a.line][: a.character]
            + text_edit.new_text
            + lines[b.line][b.character :]
            + "".join(lines[b.line + 1 :])
        )
        client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
                content_changes=[types.TextDocumentContentChangeWholeDocument(text=applied)],
            )
        )
        return types.ApplyWorkspaceEditResult(applied=True)

    try:
        uri = open_doc(client, tmp_path / "model.py")
        assert await actions(client, uri, 20) == []  # no fix on a line without one
        (action,) = await actions(client, uri, 13)
        assert action.title == "Measure and apply: torch.nn.functional.rms_norm"
        assert action.command is not None and action.command.command == "trainiumLens.fix"
        reply = await client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="trainiumLens.fix", arguments=action.command.arguments)
        )
        assert reply["outputs_equal"] is True and reply["speedup"], reply
        if reply["held"]:  # faster here: shown with a preview, applied after Apply
            assert len(asked) == 1 and reply["text"] in asked[0] and "rms_norm(hidden_states" in asked[0]
            (edit,) = edits
            (text_edit,) = edit.changes[uri]
            assert text_edit.range.start.line == 13 and text_edit.range.end.line == 15
            assert reply["applied"] is True
            # the client applied it: the line it wrote shows the measured figures, not a stale hint
            shown = await hints(client, uri)
            assert re.match(r"^⏱ [\d.]+ (µs|ms) · fix [\d.]+× faster \(was [\d.]+ (µs|ms)\)$", shown[13]), (
                shown
            )
            assert "(stale)" not in shown[13]
        else:  # slower or disturbed here: said so, nothing asked, nothing applied
            assert asked == [] and edits == [] and reply["applied"] is False
            assert any(reply["text"] in m.message for m in client.messages)
        assert (tmp_path / "model.py").read_text() == FILE  # the server never writes the file itself
        assert any(v for v in client.progress_values.values())  # work-done progress was reported
    finally:
        await stop(client)


async def test_refused_in_restricted_mode_and_when_the_file_changed(tmp_path):
    stored(tmp_path)
    client = await start(tmp_path, options={"settings": {"trainiumLens": {"trusted": False}}})
    try:
        uri = open_doc(client, tmp_path / "model.py")
        (action,) = await actions(client, uri, 13)
        assert action.command is not None
        reply = await client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="trainiumLens.fix", arguments=action.command.arguments)
        )
        assert reply == {"applied": False, "error": REFUSED, "kind": "untrusted"}
        client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(settings={"trainiumLens": {"trusted": True}})
        )
        (tmp_path / "model.py").write_text(FILE.replace("variance + self", "variance+self"))
        for _ in range(50):  # until the server read the new settings
            reply = await client.workspace_execute_command_async(
                types.ExecuteCommandParams(command="trainiumLens.fix", arguments=action.command.arguments)
            )
            if reply["kind"] != "untrusted":
                break
        assert reply["kind"] == "usage" and "changed since the run" in reply["error"], reply
    finally:
        await stop(client)

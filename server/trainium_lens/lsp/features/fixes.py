"""Quick fixes: ``textDocument/codeAction`` on a finding that carries its fix as an
edit ("Measure and apply: torch.nn.functional.rms_norm"), then the command
``trainiumLens.fix`` that proves it first.

The action holds no edit: accepting it runs the measurement (``engine/fixes.py``:
the original and the edited function as variants, the run's host and backend,
same inputs, outputs compared) with work-done progress the user can cancel. The
measured result and a preview of the replacement come back as a message with an
"Apply" choice only when the fix held; the ``WorkspaceEdit`` goes out only after
the user picks it, and only if the file still holds what was measured (on disk
and in the editor). Refused in Restricted Mode, as profiling is: it runs the
workspace's code.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.uris import to_fs_path

from trainium_lens.analysis.fixes.source import apply, holds
from trainium_lens.errors import LensError
from trainium_lens.harness.markers import source_lines
from trainium_lens.lsp import command_ids, workspace_trust
from trainium_lens.lsp.long_run import Failure, LongRun
from trainium_lens.lsp.runs import AppliedFix
from trainium_lens.lsp.state import LensServer
from trainium_lens.model import figures
from trainium_lens.model.codec import one_line
from trainium_lens.model.result import Edit, Finding, Result

COMMAND = command_ids.FIX
TITLE = "Measure and apply: {}"
APPLY = "Apply"
REFUSED = (
    "Trainium Lens: measuring a fix is off in Restricted Mode: it runs this workspace's code. "
    "Trust the workspace (Manage Workspace Trust) to use it."
)


def actions(ls: LensServer, params: types.CodeActionParams) -> list[types.CodeAction]:
    uri = params.text_document.uri
    annotations = ls.annotations(uri)
    if annotations is None:
        return []
    first, last = params.range.start.line, params.range.end.line
    out = []
    for placed in annotations.findings:
        f = placed.finding
        if f.edit is None or placed.stale or not first <= placed.line <= last:
            continue
        diags = [
            d
            for d in params.context.diagnostics
            if d.code == f.kind and d.range.start.line == placed.line and d.source == "Trainium Lens"
        ]
        title = TITLE.format(f.edit.title)
        arg = {"uri": uri, "run_id": placed.result.run_id, "line": f.line, "kind": f.kind}
        out.append(
            types.CodeAction(
                title=title,
                kind=types.CodeActionKind.QuickFix,
                diagnostics=diags or None,
                command=types.Command(title=title, command=COMMAND, arguments=[arg]),
            )
        )
    return out


def _locate(ls: LensServer, arg: Any) -> tuple[Result, Finding, Path]:
    if not isinstance(arg, dict) or not all(isinstance(arg.get(k), str) for k in ("uri", "run_id", "kind")):
        raise LensError(f"{COMMAND} takes one argument {{uri, run_id, line, kind}}")
    runs = ls.document_runs(arg["uri"])
    path_str = to_fs_path(arg["uri"])
    if runs is None or not path_str:
        raise LensError("this file is not inside the workspace")
    runs.index.refresh()
    result = next((r for r in runs.index.store.load_all() if r.run_id == arg["run_id"]), None)
    if result is None:
        raise LensError(f"run {arg['run_id']} is no longer stored: profile again")
    found = next(
        (f for f in result.findings if f.edit and f.kind == arg["kind"] and f.line == arg.get("line")), None
    )
    if found is None:
        raise LensError("that finding offers no fix any more: profile again")
    return result, found, runs.index.workspace


async def run_fix(ls: LensServer, *args: Any) -> dict:
    if workspace_trust.refused(ls):  # the client shows the server's words (workspace_trust.refusal)
        return workspace_trust.refusal(REFUSED, applied=False)
    try:
        result, finding, workspace = _locate(ls, args[0] if len(args) == 1 else None)
        edit = finding.edit
        assert edit is not None
        uri = args[0]["uri"]
        doc = ls.workspace.text_documents.get(uri)
        if doc is not None and not holds(doc.source, edit):
            raise LensError(f"{edit.file} changed since the run (or has unsaved changes): profile it again")
        from trainium_lens.engine.fixes import checked_edit, current_text

        checked_edit(workspace, result, finding)  # on disk too, and the edit the builder writes of it
    except LensError as err:
        ls.show(f"Trainium Lens: {err}", types.MessageType.Error)
        return {"applied": False, "error": str(err), "kind": "usage"}
    measured = await _measure(ls, result, finding, edit, workspace)
    if isinstance(measured, dict):
        return measured
    report = {"applied": False, "held": measured.held, "text": measured.text, **measured.to_dict()}
    # stored text (a repository can write it): each line shown escaped (bidi, controls)
    shown = "\n".join(one_line(part) for part in source_lines(edit.replacement))
    preview = shown  # whole: what Apply writes is all shown before it is written
    message = f"Trainium Lens: {edit.title} at {edit.file}:{edit.start_line}: {measured.text}"
    if not measured.held:
        ls.show(message, types.MessageType.Warning)
        return report
    choice = await ls.window_show_message_request_async(
        types.ShowMessageRequestParams(
            type=types.MessageType.Info,
            message=f"{message}\n\nReplaces lines {edit.start_line}–{edit.end_line} with:\n{preview}",
            actions=[types.MessageActionItem(title=APPLY), types.MessageActionItem(title="Cancel")],
        )
    )
    if choice is None or choice.title != APPLY:
        return report
    doc = ls.workspace.text_documents.get(uri)
    if doc is not None and not holds(doc.source, edit):  # typed into while it measured
        ls.show(f"Trainium Lens: {edit.file} changed while the fix was measured: not applied")
        return report
    # the text the edit goes into, read before it is sent: the client's didChange for it
    # can arrive before its reply
    before = doc.source if doc is not None else current_text(workspace, edit)
    applied = await ls.workspace_apply_edit_async(
        types.ApplyWorkspaceEditParams(edit=workspace_edit(ls, uri, edit), label=edit.title)
    )
    report["applied"] = bool(applied and applied.applied)
    runs = ls.document_runs(uri)
    if report["applied"] and runs is not None:
        runs.applied.append(applied_fix(result, edit, measured, before))
        ls.refresh_pulled_views()
    return report


def applied_fix(result: Result, edit: Edit, measured: Any, before: str) -> AppliedFix:
    """The hint a fix leaves on its line (the first non-blank line the edit wrote, as
    it reads after the edit: a keyword added inside a call is part of a longer line):
    the figures its measurement gave."""
    after = source_lines(apply(before, edit))
    span = after[edit.start_line - 1 : edit.start_line + edit.replacement.count("\n")]
    first = next((ln.strip() for ln in span if ln.strip()), "")
    # short: VS Code cuts a hint at editor.inlayHints.maximumLength (43 by default);
    # the whole verdict is its tooltip
    label = "⏱ fix applied"
    if measured.before_us and measured.after_us and measured.speedup:
        label = (
            f"⏱ {figures.time_us(measured.after_us)} · fix {figures.ratio(measured.speedup)} faster"
            f" (was {figures.time_us(measured.before_us)})"
        )
    tooltip = f"{edit.title}, measured before applying: {measured.text}"
    return AppliedFix(
        first, edit.start_line - 1, label, result.run_id, result.function.file, result.function.name, tooltip
    )


def workspace_edit(ls: LensServer, uri: str, edit: Edit) -> types.WorkspaceEdit:
    """The edit in the client's position units (UTF-16 by default)."""
    lines, _ = ls.doc_lines(uri) if uri in ls.workspace.text_documents else (None, None)
    if lines is None:
        from trainium_lens.harness.markers import read_source

        lines = source_lines(read_source(Path(to_fs_path(uri) or "")))
    units = ls.workspace.position_codec.client_num_units

    def pos(line: int, col: int) -> types.Position:
        text = lines[line - 1] if 0 < line <= len(lines) else ""
        return types.Position(line=line - 1, character=units(text[:col]))

    rng = types.Range(start=pos(edit.start_line, edit.start_col), end=pos(edit.end_line, edit.end_col))
    return types.WorkspaceEdit(changes={uri: [types.TextEdit(range=rng, new_text=edit.replacement)]})


async def _measure(ls: LensServer, result: Result, finding: Finding, edit: Edit, workspace: Path) -> Any:
    from trainium_lens.engine.fixes import measure

    target = ls.target()
    run = LongRun(ls, TITLE.format(edit.title))  # not on the status bar: no runState
    await run.open_progress("trainium-lens-fix")
    run.begin()

    def on_event(event: dict) -> None:
        if event.get("event") == "stage":
            run.report(
                f"{event.get('function') or ''} {event.get('stage')}: {event.get('message') or ''}".strip()
            )

    try:
        measured = await run.work(
            lambda events: measure(
                result,
                edit,
                1,
                finding.line,
                workspace,
                target,
                events,
                run.cancel,
                ls.settings.timeout_seconds,
            ),
            on_event,
        )
    except (LensError, OSError) as err:
        if run.cancel.is_set():
            failure = Failure(
                "fix measurement cancelled: nothing applied", "cancelled", types.MessageType.Info
            )
        else:
            failure = Failure(f"fix not measured: {err}", "failed")
        return run.fail(failure, applied=False)
    finally:
        run.end("done")
    if run.cancel.is_set():
        ls.show("Trainium Lens: fix measurement cancelled: nothing applied")
        return {"applied": False, "error": "cancelled", "kind": "cancelled"}
    return measured


def register(server: LensServer) -> None:
    server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix]),
    )(actions)
    server.command(COMMAND)(run_fix)

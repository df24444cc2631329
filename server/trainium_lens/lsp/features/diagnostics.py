"""Findings (and a failed run's error in the user's code) as diagnostics.

Source "Trainium Lens"; severity from the finding (analysis sets it by kind);
``code`` is the finding's kind so a client can filter. They move with their
lines like the hints do.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from lsprotocol import types

from trainium_lens.lsp.state import LensServer
from trainium_lens.model.codec import visible

SOURCE = "Trainium Lens"
SEVERITY = {
    "error": types.DiagnosticSeverity.Error,
    "warning": types.DiagnosticSeverity.Warning,
    "info": types.DiagnosticSeverity.Information,
    "hint": types.DiagnosticSeverity.Hint,
}


def _line_range(lines: Sequence[str], line: int, units: Callable[[str], int]) -> types.Range:
    text = lines[line] if 0 <= line < len(lines) else ""
    start = len(text) - len(text.lstrip())
    return types.Range(
        start=types.Position(line=line, character=units(text[:start])),
        end=types.Position(line=line, character=units(text)),
    )


def diagnostics_for(ls: LensServer, uri: str) -> list[types.Diagnostic]:
    runs = ls.documents.get(uri)
    annotations = ls.annotations(uri)
    if runs is None or annotations is None:
        return []
    lines, _ = ls.doc_lines(uri)
    units = ls.workspace.position_codec.client_num_units
    out = []
    for placed in annotations.findings:
        f = placed.finding
        message = f.message + (f"\nFix: {f.fix}" if f.fix else "")
        if placed.stale:
            message += "\n(stale: the line changed since this run)"
        out.append(
            types.Diagnostic(
                range=_line_range(lines, placed.line, units),
                message=message,
                source=SOURCE,
                severity=SEVERITY.get(f.severity, types.DiagnosticSeverity.Information),
                code=f.kind,
                data={"run_id": placed.result.run_id},
            )
        )
    for line, message, _origin in runs.errors:
        out.append(
            types.Diagnostic(
                range=_line_range(lines, line, units),
                message=visible(message),  # the user's exception text: bidi shown escaped
                source=SOURCE,
                severity=types.DiagnosticSeverity.Error,
                code="profile_failed",
            )
        )
    return out


def publish(ls: LensServer, uri: str) -> None:
    ls.text_document_publish_diagnostics(
        types.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics_for(ls, uri))
    )


def register(server: LensServer) -> None:
    server.on_view_change.append(publish)

"""The per-line table as HTML under the cell, with a heat bar per line (the plain
text beside it is the CLI's, for terminals and logs). Every stored string is escaped:
a line's text is the user's source."""

from __future__ import annotations

import html

from trainium_lens.cli.render.result import headline, reconciled_text
from trainium_lens.model import figures
from trainium_lens.model.cells import is_cell_file
from trainium_lens.model.result import Result

_STYLE = (
    "<style>.tl-lines td,.tl-lines th{padding:1px 8px;text-align:right;font-family:monospace}"
    ".tl-lines td.src,.tl-lines th.src{text-align:left;white-space:pre}"
    ".tl-bar{display:inline-block;height:0.8em;background:#e8590c;vertical-align:middle}</style>"
)


def where(result: Result, file: str, line: int) -> str:
    """``3`` for a line of the profiled cell, ``cell 1757110726.py:12`` for another
    cell's, ``model.py:40`` for a workspace file's."""
    if file == result.function.file:
        return str(line)
    if is_cell_file(file):
        return f"cell {file.split('/', 1)[1]}:{line}"
    return f"{file}:{line}"


def render_html(header: list[str], results: list[Result]) -> str:
    parts = [_STYLE, "<div class='tl'>", *(f"<div>{html.escape(h)}</div>" for h in header)]
    for result in results:
        parts.append(f"<p><b>{html.escape(headline(result))}</b></p>")
        reconciled = reconciled_text(result)
        if reconciled:
            parts.append(f"<p>{html.escape(reconciled)}</p>")
        parts.append(_lines(result))
    parts.append("</div>")
    return "".join(parts)


def _lines(result: Result) -> str:
    total = result.totals.self_time_us
    clock = "" if result.clock == "neuron" else f" ({html.escape(result.clock)})"
    rows = [
        "<table class='tl-lines'><tr><th>line</th><th class='src'>source</th>"
        f"<th>fwd{clock}</th><th>bwd</th><th>share</th><th></th></tr>"
    ]
    ordered = sorted(result.lines, key=lambda s: (s.file != result.function.file, s.file, s.line))
    for s in ordered:
        if not (s.time_us or s.total_time_us):
            continue
        width = max(0.0, min(100.0, 100 * s.time_us / total)) if total > 0 else 0.0
        bwd = figures.time_us(s.backward_self_time_us) if s.backward_self_time_us else ""
        rows.append(
            f"<tr><td>{html.escape(where(result, s.file, s.line))}</td>"
            f"<td class='src'>{html.escape(s.text)}</td>"
            f"<td>{html.escape(figures.time_us(s.self_time_us))}</td><td>{html.escape(bwd)}</td>"
            f"<td>{html.escape(figures.share(s.time_us, total))}</td>"
            f"<td><span class='tl-bar' style='width:{width * 1.2:.0f}px'></span></td></tr>"
        )
    rows.append("</table>")
    return "".join(rows)

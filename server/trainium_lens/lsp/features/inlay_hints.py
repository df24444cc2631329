"""Inlay hints: a line's cost at the end of the line.

``⏱ 1.16 ms · 49% · 3 ops`` on Neuron, ``⏱ 12 µs cpu · 8% · 1 op`` on CPU (the
clock is named whenever it is not Neuron device time), ``(stale)`` once the
line was edited, and ``▼ 38%`` against the function's previous run (of the
line's forward + backward where the step has backward). A line of a training
step whose forward caused backward work reads
``⏱ fwd 0.40 ms · bwd 0.91 ms cpu · 12% · 2 ops`` (share: of the whole step).
A line whose work was counted ends with its roofline marker: ``· 41% peak``,
``· mem-bound`` or ``· overhead`` (present/roofline_format.py). A stale line keeps
only its time, share and ops, so that ``(stale)`` fits before VS Code cuts the hint.
A run judged noisy (``analysis/noise.py``) ends its hints with ``⚠ noisy``;
the heat marks its lines unreliable and the client draws them apart.
A fix applied from a quick fix (``fixes.py``) shows its measured figures on the
line it wrote, ``⏱ 5.3 µs · fix 3.1× faster (was 16.4 µs)`` (the whole verdict
in its tooltip), in place of the old run's stale hint, until the function is
profiled again.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Sequence

from lsprotocol import types

from trainium_lens.lsp.present import format as fmt
from trainium_lens.lsp.present import rank_format, roofline_format, trust
from trainium_lens.lsp.runs import Annotation, Annotations
from trainium_lens.lsp.settings import Threshold
from trainium_lens.lsp.state import LensServer
from trainium_lens.model import figures


def hint_time(a: Annotation) -> str:
    """``0.40 ms cpu``, or ``fwd 0.40 ms · bwd 0.91 ms cpu`` where the line has backward."""
    s, clock = a.stat, fmt.clock_suffix(a.result)
    total = " total" if a.inclusive else ""
    fwd = s.total_time_us if a.inclusive else s.self_time_us
    bwd = s.backward_total_time_us if a.inclusive else s.backward_self_time_us
    if not bwd:
        return f"{figures.time_us(a.time_us)}{clock}{total}"
    text = f"fwd {figures.time_us(fwd)} · bwd {figures.time_us(bwd)}"
    if s.recompute_time_us and not a.inclusive:
        text += f" · recompute {figures.time_us(s.recompute_time_us)}"
    return text + clock + total


#: VS Code cuts an inlay hint longer than this with "…" (``editor.inlayHints.maximumLength``,
#: default 43): a stale line's "(stale)" must fit inside it.
HINT_MAX = 43


def label(a: Annotation) -> str:
    result = a.result
    parts = [f"⏱ {hint_time(a)}"]
    parts.append(figures.share(a.time_us, result.totals.self_time_us))
    if a.stat.calls:
        parts.append(fmt.plural(a.stat.calls, "op"))
    if a.stale:
        # The figure no longer applies to the line, and that is what the hint must say:
        # the details of the run (roofline, spread, change, noise) go, and where even the
        # rest would push "(stale)" past the cut, only the time stays (an edited line of a
        # noisy run read "… · ⚠ noisy (stal…" in the editor).
        text = f"{' · '.join(parts)} (stale)"
        return text if len(text) <= HINT_MAX else f"{parts[0]} (stale)"
    if not a.inclusive:
        parts += [m] if (m := roofline_format.marker(result, a.stat)) else []
    parts += [spread] if (spread := rank_format.hint_spread(a.stat)) and not a.inclusive else []
    if a.previous_us is not None and not a.inclusive:
        change = fmt.delta(a.previous_us, a.stat.time_us)  # fwd+bwd, as previous_us
        if change:
            parts.append(change)
    if trust.unreliable(result):
        parts.append("⚠ noisy")  # the run was judged noisy: the figure is unreliable
    return " · ".join(parts)


def _units(ls: LensServer) -> Callable[[str], int]:
    codec = ls.workspace.position_codec.client_num_units  # UTF-16 columns by default
    return lambda text: len(text) if text.isascii() else codec(text)


class HintView:
    """The lines that pass the threshold (worked out once per set of
    annotations) and their hints, made when first asked for: an editor asks
    for its viewport, again after every keystroke."""

    def __init__(self, annotations: Annotations, threshold: Threshold) -> None:
        self.shown = [
            a for a in annotations.lines if threshold.passes(a.time_us, a.result.totals.self_time_us)
        ]
        self.at = [a.line for a in self.shown]
        self.made: dict[int, types.InlayHint] = {}

    def moved(self) -> None:
        """Lines were inserted or deleted above some annotations."""
        self.at = [a.line for a in self.shown]
        self.made.clear()

    def forget(self, lines: Iterable[int]) -> None:
        for line in lines:  # typed in: its staleness and length may differ now
            i = bisect.bisect_left(self.at, line)
            if i < len(self.at) and self.at[i] == line:
                self.made.pop(i, None)

    def hints(
        self, first: int, last: int, lines: Sequence[str], units: Callable[[str], int]
    ) -> list[types.InlayHint]:
        out = []
        for i in range(bisect.bisect_left(self.at, first), bisect.bisect_right(self.at, last)):
            hint = self.made.get(i)
            if hint is None:
                a = self.shown[i]
                if a.line >= len(lines):
                    continue
                hint = self.made[i] = types.InlayHint(
                    position=types.Position(line=a.line, character=units(lines[a.line])),
                    label=label(a),
                    padding_left=True,
                )
            out.append(hint)
        return out


def hints(ls: LensServer, params: types.InlayHintParams) -> list[types.InlayHint]:
    uri = params.text_document.uri
    annotations = ls.annotations(uri)
    if annotations is None:
        return []
    lines, _ = ls.doc_lines(uri)
    first, last = params.range.start.line, params.range.end.line
    fixed = _fix_hints(ls, uri, lines, first, last)
    if not annotations.lines:
        return list(fixed.values())
    threshold = ls.settings.hint_threshold
    view = annotations.views.get(("hints", threshold))
    if view is None:
        view = annotations.views[("hints", threshold)] = HintView(annotations, threshold)
    out = [h for h in view.hints(first, last, lines, _units(ls)) if h.position.line not in fixed]
    return sorted([*out, *fixed.values()], key=lambda h: h.position.line)


def _fix_hints(ls: LensServer, uri: str, lines: Sequence[str], first: int, last: int) -> dict:
    """line -> the hint of a fix applied there, while no newer run of its function exists."""
    runs = ls.document_runs(uri)
    if runs is None or not runs.applied:
        return {}
    out: dict[int, types.InlayHint] = {}
    units = _units(ls)
    for fix in list(runs.applied):
        history = runs.index.history(fix.file, fix.function)
        if history and history[-1].run_id != fix.run_id:  # profiled again: its figures rule
            runs.applied.remove(fix)
            continue
        line = fix.line_in(lines)
        if line is None or not first <= line <= last:
            continue
        out[line] = types.InlayHint(
            position=types.Position(line=line, character=units(lines[line])),
            label=fix.label,
            tooltip=fix.tooltip or None,
            padding_left=True,
        )
    return out


def register(server: LensServer) -> None:
    @server.feature(types.TEXT_DOCUMENT_INLAY_HINT, types.InlayHintOptions(resolve_provider=False))
    def inlay_hint(ls: LensServer, params: types.InlayHintParams) -> list[types.InlayHint]:
        return hints(ls, params)

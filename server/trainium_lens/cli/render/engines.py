"""The CLI's text for a Trn1 run whose Neuron device profile was read: each line's
time per NeuronCore engine (the union of its instructions' intervals on that
engine, so a line's engines can add up to more than its own time: they run in
parallel). Empty for every other result."""

from __future__ import annotations

from trainium_lens.cli.render.text import Style, fmt_us, table
from trainium_lens.model.result import Result


def render_engines(result: Result, style: Style | None = None) -> str:
    """``"\\n\\n" + section`` when lines carry engine times, else ``""`` (appended to
    ``render_result``'s text, like ``render_ranks``)."""
    lines = [s for s in result.lines if s.engines]
    if not lines:
        return ""
    style = style or Style()
    engines = sorted({e.engine for s in lines for e in s.engines})
    rows = []
    for s in sorted(lines, key=lambda s: -s.self_time_us):
        per = {e.engine: e.time_us for e in s.engines}
        rows.append(
            [
                f"{s.file}:{s.line}" if s.file != result.function.file else str(s.line),
                fmt_us(s.self_time_us, style),
                *[fmt_us(per[n], style) if n in per else "" for n in engines],
            ]
        )
    out = ["  per engine (Neuron device time; engines overlap, so they may add up to more)"]
    out += table(["line", "device", *engines], rows, "r" * (2 + len(engines)))
    return "\n\n" + "\n".join(out)

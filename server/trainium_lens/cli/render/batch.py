"""The tables under a batch of results: a comparison per group of variants
(``analysis.compare.variant_groups``), and a plain summary of the rest."""

from __future__ import annotations

from trainium_lens.analysis.variants import compare_variants, summarize, variant_groups
from trainium_lens.cli.render.compare import render_comparison
from trainium_lens.cli.render.text import CLOCK_NAMES, Style, finish, fmt_count, fmt_us, table
from trainium_lens.model.result import Result


def render_summary(results: list[Result], style: Style | None = None) -> str:
    style = style or Style()
    rows = [
        [
            r.function,
            str(r.line),
            fmt_us(r.time_us, style) + f" {r.clock}",
            fmt_count(r.dispatches),
            fmt_us(r.wall_us_median, style),
        ]
        for r in summarize(results)
    ]
    clocks = {r.clock for r in results}
    clock = clocks.pop() if len(clocks) == 1 else "mixed"
    out = [
        f"summary ({CLOCK_NAMES.get(clock, clock)} per call; not variants of each other, "
        f"so not compared: variants share inputs= and output shape, or compare=NAME)"
    ]
    out += table(["function", "line", "time", "dispatches", "wall median"], rows, "lrrrr")
    return finish("\n".join(out), style)


def render_batch(results: list[Result], style: Style | None = None) -> list[str]:
    """Sections after the per-function tables; none for a single result."""
    style = style or Style()
    if len(results) < 2:
        return []
    groups, others = variant_groups(results)
    sections = [render_comparison(compare_variants(group), style) for group in groups]
    if others:
        sections.append(render_summary(others, style))
    return sections

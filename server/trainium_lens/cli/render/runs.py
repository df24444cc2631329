"""The table of stored runs, newest first (``runs``, and ``show`` with no run)."""

from __future__ import annotations

from trainium_lens.cli.render.text import Style, fmt_us, table
from trainium_lens.model.result import Result


def when(result: Result) -> str:
    """``2026-11-29 10:15`` (UTC, as stored) from the ISO timestamp."""
    text = result.created_at.replace("T", " ")
    return text[:16] if len(text) >= 16 else text


def listing(results: list[Result], style: Style, *, qualified: bool = True) -> list[str]:
    """The table, newest first (``results`` oldest first, as the store gives them)."""
    rows = []
    for r in reversed(results):
        name = f"{r.function.file}::{r.function.name}" if qualified else r.function.name
        rows.append(
            [
                when(r),
                name,
                f"{r.backend}@{r.host}",
                f"{fmt_us(r.totals.self_time_us, style)} {r.clock}",
                r.git.short,
                r.run_id,
            ]
        )
    width = style.width
    return table(
        ["when (UTC)", "function", "backend@host", "step", "commit", "run"],
        rows,
        "llllll",
        width=width,
        shrink={1: 12},
        ellipsis=style.ellipsis,
    )

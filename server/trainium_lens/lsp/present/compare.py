"""Comparisons of runs in the editor's terms: per-line deltas of two runs of one
function, and the table of a file's variants, as data and as markdown (for
``features/compare.py``'s command and ``features/panel.py``).

The comparisons themselves are ``analysis.compare``'s (pure functions of
results); this module makes them plain data and renders markdown.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from trainium_lens.analysis.compare import LineDelta, diff_runs
from trainium_lens.analysis.variants import BASIS_DEVICE, compare_variants, variant_groups
from trainium_lens.lsp.present import format as fmt
from trainium_lens.lsp.present import markdown as md
from trainium_lens.model import figures
from trainium_lens.model.result import Result


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if hasattr(value, "to_dict"):
        return value.to_dict()
    return value


def diff(before: Result, after: Result) -> dict:
    """The structured per-line diff of two runs (``analysis.compare.diff_runs``)."""
    return _plain(diff_runs(before, after))


def variants(results: list[Result]) -> dict | None:
    """The comparison table of a file's variants, or None for fewer than two."""
    if len(results) < 2:
        return None
    return _plain(compare_variants(results))


def diff_markdown(before: Result, after: Result) -> str:
    """Line by line, before → after (``analysis.compare.diff_runs``), for a hover
    or the panel's fallback: forward, backward and both where a step has
    backward; a line of another file is named ``file:line``."""
    d = diff_runs(before, after)
    t = d.totals
    clock = fmt.clock_suffix(after)
    head = (
        f"**{md.escape(after.function.name)}**: {figures.time_us(t.before_us)} → "
        f"{figures.time_us(t.after_us)}{clock} ({fmt.delta(t.before_us, t.after_us) or 'n/a'})"
    )
    if t.speedup:
        head += f" · speedup {figures.ratio(t.speedup)} ({t.speedup_basis})"
    if d.backward:
        head += (
            f"\n\nstep: forward {_pair(t.before_forward_us, t.after_forward_us)} · backward "
            f"{_pair(t.before_backward_us, t.after_backward_us)} · optimizer "
            f"{_pair(t.before_optimizer_us, t.after_optimizer_us)}"
        )
    if d.note:
        head += f"\n\n_{md.escape(d.note)}_"
    shown = sorted(
        (x for x in d.lines if x.before_us or x.after_us),
        key=lambda x: (x.file != d.file, x.file, x.after_line or x.before_line or 0),
    )
    if d.backward:
        rows = ["| line | source | fwd | bwd | fwd + bwd | Δ |", "| ---: | --- | ---: | ---: | ---: | ---: |"]
        for x in shown:
            rows.append(
                f"| {_where(x, d.file)} | {md.code(x.text.strip(), in_table=True)} | "
                f"{_pair(x.before_fwd_us, x.after_fwd_us)} | {_pair(x.before_bwd_us, x.after_bwd_us)} | "
                f"{_pair(x.before_us, x.after_us)} | {_change(x)} |"
            )
    else:
        rows = ["| line | source | before | after | Δ |", "| ---: | --- | ---: | ---: | ---: |"]
        for x in shown:
            rows.append(
                f"| {_where(x, d.file)} | {md.code(x.text.strip(), in_table=True)} | "
                f"{_time(x.before_us, 'new')} | "
                f"{_time(x.after_us, 'removed')} | {_change(x)} |"
            )
    return head + "\n\n" + "\n".join(rows)


def _time(us: float | None, missing: str) -> str:
    return figures.time_us(us) if us is not None else missing


def _pair(before: float | None, after: float | None) -> str:
    if not before and not after:
        return ""
    return f"{_time(before, '–')} → {_time(after, '–')}"


def _change(x: LineDelta) -> str:
    if x.before_us is None or x.after_us is None:
        return ""
    return fmt.delta(x.before_us, x.after_us) or ""


def _where(x: LineDelta, home: str) -> str:
    number = x.after_line if x.after_line is not None else x.before_line
    return str(number) if x.file in ("", home) else f"{md.escape(x.file)}:{number}"


def variants_markdown(results: list[Result]) -> str:
    """One row per variant, ranked on the true clock (``analysis.variants``):
    device time, else the unprofiled wall median; the profiled figure beside."""
    if not results:
        return "_no runs_"
    c = compare_variants(results)
    device = c.speedup_basis == BASIS_DEVICE
    # named for what they hold: walls timed in turn are not each function's own wall, and
    # on the cpu clock the profiled figure is the headline's (ops + host: Result.per_call_us)
    wall_name = "wall in turn" if c.walls_in_turn else "wall median"
    rows = [
        "| variant | "
        + ("time" if device else wall_name)
        + " | speedup | "
        + (wall_name if device else "profiled (ops + host)" if c.clock == "cpu" else "profiled")
        + " | dispatches | max abs diff |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in c.rows:
        wall = figures.time_us(row.wall_us_median) if row.wall_us_median is not None else "–"
        shown = row.per_call_us if row.per_call_us is not None and not device else row.time_us
        profiled = f"{figures.time_us(shown)} {row.clock}"
        diff_ = row.max_abs_diff
        rows.append(
            f"| {md.escape(row.variant)} | {profiled if device else wall} | "
            f"{figures.ratio(row.speedup) if row.speedup else '–'} | {wall if device else profiled} | "
            f"{figures.count(row.dispatches)} | {f'{diff_:.3g}' if diff_ is not None else '–'} |"
        )
    text = "\n".join(rows)
    if c.fastest and len(c.rows) > 1:
        text += f"\n\nfastest: **{md.escape(c.fastest)}** ({c.speedup_basis})"
    if c.note:
        text += f"\n\n_{md.escape(c.note)}_"
    return text


def file_variants(histories: dict[str, list[Result]]) -> list[Result]:
    """The latest runs of the file's first group of variants (functions sharing
    ``inputs=`` and output shape, or ``compare=``; analysis.compare.variant_groups),
    in file order; empty when no two functions are variants."""
    latest = sorted(
        (runs[-1] for runs in histories.values() if runs), key=lambda r: (r.function.line, r.function.name)
    )
    groups, _others = variant_groups(latest)
    return groups[0] if groups else []

"""Compare runs in the editor: per-line deltas of two runs of one function, and
the table of a file's variants (``trainiumLens.compareWithPrevious``).

The comparisons themselves are ``analysis.compare``'s (pure functions of
results); this module matches lines for the hints and renders markdown.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from lsprotocol import types

from trainium_lens.analysis.compare import compare_variants, diff_runs, variant_groups
from trainium_lens.lsp.present import format as fmt
from trainium_lens.lsp.present.markdown import code, escape
from trainium_lens.lsp.runs import line_times
from trainium_lens.lsp.state import LensServer
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
    """Line by line, before → after, for a hover or the panel's fallback."""
    times = line_times(before, after)
    head = (
        f"**{escape(after.function.name)}**: {fmt.time_us(before.totals.self_time_us)} → "
        f"{fmt.time_us(after.totals.self_time_us)} {escape(after.clock)}"
        f" ({fmt.delta(before.totals.self_time_us, after.totals.self_time_us) or 'n/a'})"
    )
    rows = ["| line | source | before | after | Δ |", "| ---: | --- | ---: | ---: | ---: |"]
    for stat in sorted(after.lines, key=lambda s: s.line):
        now = stat.self_time_us or stat.total_time_us
        was = times.get(stat.line)
        rows.append(
            f"| {stat.line} | {code(stat.text.strip()[:80], in_table=True)} | "
            f"{fmt.time_us(was) if was is not None else 'new'} | {fmt.time_us(now)} | "
            f"{(fmt.delta(was, now) or '') if was is not None else ''} |"
        )
    return head + "\n\n" + "\n".join(rows)


def variants_markdown(results: list[Result]) -> str:
    """One row per variant: primary time, CPU self time, dispatches, wall median."""
    if not results:
        return "_no runs_"
    base = results[0].totals.self_time_us
    rows = [
        "| variant | time | vs first | cpu self | dispatches | wall median | max abs diff |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        wall = r.totals.wall_us_median
        diff_ = r.output.max_abs_diff
        rows.append(
            f"| {escape(r.function.name)} | {fmt.time_us(r.totals.self_time_us)} {escape(r.clock)} | "
            f"{fmt.delta(base, r.totals.self_time_us) or ''} | {fmt.time_us(r.totals.self_cpu_us)} | "
            f"{fmt.count(r.totals.dispatches)} | {fmt.time_us(wall) if wall is not None else '–'} | "
            f"{f'{diff_:.3g}' if diff_ is not None else '–'} |"
        )
    return "\n".join(rows)


# -- trainiumLens.compareWithPrevious ------------------------------------------

COMMAND = "trainiumLens.compareWithPrevious"


def file_variants(histories: dict[str, list[Result]]) -> list[Result]:
    """The latest runs of the file's first group of variants (functions sharing
    ``inputs=`` and output shape, or ``compare=``; analysis.compare.variant_groups),
    in file order; empty when no two functions are variants."""
    latest = sorted(
        (runs[-1] for runs in histories.values() if runs), key=lambda r: (r.function.line, r.function.name)
    )
    groups, _others = variant_groups(latest)
    return groups[0] if groups else []


def compare_command(ls: LensServer, args: tuple) -> dict:
    arg = args[0] if len(args) == 1 and isinstance(args[0], dict) else {}
    uri, function = arg.get("uri"), arg.get("function")
    runs = ls.document_runs(uri) if isinstance(uri, str) else None
    if runs is None:
        message = f"{COMMAND} takes one argument {{uri, function?}} naming a workspace file"
        ls.show(f"Trainium Lens: {message}", types.MessageType.Error)
        return {"error": message}
    runs.index.refresh()
    histories = runs.index.functions(runs.file)
    if not function and len(histories) == 1:
        function = next(iter(histories))
    if function:
        history = histories.get(function, [])
        if len(history) < 2:
            message = (
                f"{function} has {len(history)} run{'s' if len(history) != 1 else ''}: "
                f"profile it again to compare"
            )
            ls.show(f"Trainium Lens: {message}", types.MessageType.Info)
            return {"error": message}
        before, after = history[-2], history[-1]
        return {"function": function, "diff": diff(before, after), "markdown": diff_markdown(before, after)}
    results = file_variants(histories)
    if len(results) < 2:
        message = f"{runs.file} has no runs to compare yet: profile its functions first"
        ls.show(f"Trainium Lens: {message}", types.MessageType.Info)
        return {"error": message}
    return {"comparison": variants(results), "markdown": variants_markdown(results)}


def register(server: LensServer) -> None:
    @server.command(COMMAND)
    def compare_with_previous(ls: LensServer, *args: Any) -> dict:
        return compare_command(ls, args)

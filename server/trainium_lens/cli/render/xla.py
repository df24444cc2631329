"""The CLI's compiled-graph sections of an xla result, kept to a screen.

A compiled model runs hundreds of HLO instructions and fusions; one row each
swamps the per-line table. By default the fusions are grouped per credited line
(its top ``TOP_FUSIONS`` by time, then "+K more") and the instruction table shows
the top ``TOP_INSTRUCTIONS``; ``--verbose`` (``Style.verbose``) lists every one, and
the JSON (``--json``) always keeps them all.
"""

from __future__ import annotations

from trainium_lens.cli.render.text import Style, fmt_count, fmt_pct, fmt_us, spans, table, truncate
from trainium_lens.model import figures
from trainium_lens.model.lines import Region
from trainium_lens.model.result import Result

TOP_FUSIONS = 3  # per line
TOP_REGION_LINES = 12
TOP_INSTRUCTIONS = 12
NAME_WIDTH = 40


def regions_section(result: Result, clock: str, style: Style) -> list[str]:
    if not result.regions:
        return []
    if style.verbose:
        return ["", "  compiled regions (fusions)", *(_one_region(r, clock, style) for r in result.regions)]
    by_line: dict[tuple[str, int], list[Region]] = {}
    for region in result.regions:
        by_line.setdefault((region.file, region.line), []).append(region)
    groups = sorted(by_line.items(), key=lambda kv: -sum(r.self_time_us for r in kv[1]))
    out = [
        "",
        f"  compiled regions: {figures.plural(len(result.regions), 'fusion')} on "
        f"{figures.plural(len(groups), 'line')} (--verbose: each)",
    ]
    for (file, line), regions in groups[:TOP_REGION_LINES]:
        regions.sort(key=lambda r: -r.self_time_us)
        where = str(line) if file == result.function.file else f"{file}:{line}"
        top = ", ".join(f"{r.name} {fmt_us(r.self_time_us, style)}" for r in regions[:TOP_FUSIONS])
        more = f", +{len(regions) - TOP_FUSIONS} more" if len(regions) > TOP_FUSIONS else ""
        covered = sorted({c.line for r in regions for c in r.covered_lines if c.file == file} - {line})
        fused = f"; fuses lines {spans(covered, style)} too" if covered else ""
        total = sum(r.self_time_us for r in regions)
        out.append(
            f"    line {where}: {len(regions)} fusion{'s' if len(regions) != 1 else ''}, "
            f"{fmt_us(total, style)} ({clock}): {top}{more}{fused}"
        )
    if len(groups) > TOP_REGION_LINES:
        rest = groups[TOP_REGION_LINES:]
        time = sum(r.self_time_us for _k, rs in rest for r in rs)
        out.append(f"    +{len(rest)} more lines ({fmt_us(time, style)})")
    return out


def _one_region(region: Region, clock: str, style: Style) -> str:
    covered = sorted({c.line for c in region.covered_lines})
    span = f"covers lines {spans(covered, style)}" if covered else "covered lines unknown"
    nodes = f", {region.fx_nodes} ops fused" if region.fx_nodes else ""
    return (
        f"    {region.name}: line {region.line}, "
        f"{fmt_us(region.self_time_us, style)} ({clock}), {span}{nodes}"
    )


def instructions_table(result: Result, clock: str, style: Style) -> list[str]:
    """The executed HLO instructions by time (``result.ops`` of an xla run)."""
    if not result.ops:
        return ["  (no HLO instruction recorded)"]
    ops = sorted(result.ops, key=lambda o: -o.self_time_us)
    shown = ops if style.verbose else ops[:TOP_INSTRUCTIONS]
    total = result.totals.self_time_us
    rows = [
        [
            truncate(o.name, NAME_WIDTH, style),
            fmt_count(o.calls),
            fmt_us(o.self_time_us, style),
            fmt_pct(o.self_time_us / total) if total > 0 else "",
        ]
        for o in shown
    ]
    out = table(["HLO instruction", "runs", f"time ({clock})", "share"], rows, "lrrr")
    if len(ops) > len(shown):
        rest = ops[len(shown) :]
        out.append(
            f"  +{len(rest)} more instructions ({fmt_us(sum(o.self_time_us for o in rest), style)}; "
            f"--verbose or --json for all)"
        )
    return out

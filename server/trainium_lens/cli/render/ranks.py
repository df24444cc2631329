"""The CLI's text for a torchrun job (``--nproc N``): each rank's totals, and
the lines whose ranks differ the most. Empty for a one-process result."""

from __future__ import annotations

from trainium_lens.cli.render.text import Style, fmt_us, table
from trainium_lens.model import figures
from trainium_lens.model.ranks import rank_name
from trainium_lens.model.result import Result

SPREAD_LINES = 5  # the lines with the widest spread across ranks


def render_ranks(result: Result, style: Style | None = None) -> str:
    """``"\\n\\n" + section`` for a multi-rank result, else ``""`` (appended to
    ``render_result``'s text)."""
    if len(result.ranks) < 2:
        return ""
    style = style or Style()
    nodes = any(r.node for r in result.ranks)
    rows = [
        [
            *(
                [r.node or "", str(r.node_rank if r.node_rank is not None else ""), str(r.local_rank or 0)]
                if nodes
                else []
            ),
            str(r.rank),
            fmt_us(r.self_time_us, style),
            fmt_us(r.self_time_us - r.collective_us, style),
            fmt_us(r.wait_us, style),
            fmt_us(r.wall_us_median, style),
            r.artifacts.run_dir,
        ]
        for r in result.ranks
    ]
    out = [f"  {len(result.ranks)} ranks (line figures above: the median rank)"]
    head = ["node", "node rank", "local", "rank"] if nodes else ["rank"]
    align = ("lrr" if nodes else "") + "rrrrrl"
    out += table([*head, "self", "compute", "wait", "wall", "run folder"], rows, align)
    spread = sorted(
        (ln for ln in result.lines if ln.per_rank and ln.rank_max_us is not None),
        key=lambda ln: -((ln.rank_max_us or 0.0) - (ln.rank_min_us or 0.0)),
    )
    rows = []
    for ln in spread[:SPREAD_LINES]:
        median = ln.self_time_us
        pct = f"+{figures.pct(100.0 * ((ln.rank_max_us or 0.0) - median) / median)}" if median > 0 else ""
        waits = [p for p in ln.per_rank if p.wait_us > 0]
        wait = ", ".join(f"{rank_name(p.rank, p.node)} {fmt_us(p.wait_us, style)}" for p in waits[:3])
        slow_node = next((p.node for p in ln.per_rank if p.rank == ln.slowest_rank), None)
        rows.append(
            [
                str(ln.line),
                fmt_us(median, style),
                f"{fmt_us(ln.rank_min_us, style)}–{fmt_us(ln.rank_max_us, style)}",
                f"{rank_name(ln.slowest_rank or 0, slow_node)} {pct}".rstrip(),
                wait,
            ]
        )
    if rows:
        out.append("")
        out += table(["line", "median", "min–max", "slowest", "waiting"], rows, "rrrll")
    return "\n\n" + "\n".join(out)

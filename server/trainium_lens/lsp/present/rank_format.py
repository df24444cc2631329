"""Editor text for lines of a torchrun job (``--nproc N``, see model/ranks.py): the
inlay hint's spread part (``rank 3 +38%``) and the hover's per-rank table.
Both are empty for a one-process result, so single-rank text is unchanged."""

from __future__ import annotations

from trainium_lens.model import figures
from trainium_lens.model.lines import LineStat
from trainium_lens.model.ranks import rank_name


def _slowest(stat: LineStat) -> str:
    node = next((p.node for p in stat.per_rank if p.rank == stat.slowest_rank), None)
    return rank_name(stat.slowest_rank if stat.slowest_rank is not None else 0, node)


def hint_spread(stat: LineStat) -> str | None:
    """``rank 3 +38%``: the slowest rank against the line's median (its figure)."""
    if len(stat.per_rank) < 2 or stat.slowest_rank is None or stat.rank_max_us is None:
        return None
    median = stat.self_time_us
    if median <= 0:
        return f"{_slowest(stat)} only"
    pct = 100.0 * (stat.rank_max_us - median) / median
    return f"{_slowest(stat)} +{figures.pct(pct)}"


def hover_table(stat: LineStat, clock: str = "") -> str | None:
    """The line's figure per rank: self, total, waiting in collectives, vs median."""
    if len(stat.per_rank) < 2:
        return None
    median = stat.self_time_us
    waits = any(p.wait_us > 0 for p in stat.per_rank)
    head = (
        f"{len(stat.per_rank)} ranks: median **{figures.time_us(median)}{clock}**, "
        f"{figures.time_us(stat.rank_min_us or 0.0)}–{figures.time_us(stat.rank_max_us or 0.0)}, "
        f"slowest {_slowest(stat)}"
    )
    nodes = any(p.node for p in stat.per_rank)
    rows = [
        "| "
        + ("node | " if nodes else "")
        + "rank | self | total | "
        + ("wait | " if waits else "")
        + "vs median |",
        "| "
        + ("--- | " if nodes else "")
        + "---: | ---: | ---: | "
        + ("---: | " if waits else "")
        + "---: |",
    ]
    for p in stat.per_rank:
        vs = f"{100.0 * (p.self_time_us - median) / median:+.0f}%" if median > 0 else "n/a"
        mark = " (slowest)" if p.rank == stat.slowest_rank else ""
        wait = f"{figures.time_us(p.wait_us)} | " if waits else ""
        node = f"{p.node or ''} | " if nodes else ""
        rows.append(
            f"| {node}{p.rank}{mark} | {figures.time_us(p.self_time_us)}{clock} | "
            f"{figures.time_us(p.total_time_us)}{clock} | {wait}{vs} |"
        )
    note = (
        (
            "\n\n_wait: the rank's time in this line's collectives beyond the fastest "
            "rank's, i.e. waiting for the others._"
        )
        if waits
        else ""
    )
    return head + "\n\n" + "\n".join(rows) + note

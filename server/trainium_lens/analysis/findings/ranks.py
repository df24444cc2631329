"""Findings of a torchrun job (``--nproc N``): the straggler, and where the
other ranks wait for it. A pure function of the merged result (model/ranks.py)."""

from __future__ import annotations

import statistics

from trainium_lens.model import figures
from trainium_lens.model.ranks import rank_name
from trainium_lens.model.result import Finding, Result

#: A rank this much busier than the median rank is a straggler.
STRAGGLER_RATIO = 1.10
#: ... and by at least this much per step (below it: noise of the clock).
STRAGGLER_MIN_US = 20.0


def rank_findings(result: Result) -> list[Finding]:
    """The straggler: the rank with the most busy time per step (its self time
    outside collectives: what it computes while others may wait), named on the
    line where it loses the most against the median rank."""
    if len(result.ranks) < 2:
        return []
    busy = {r.rank: r.self_time_us - r.collective_us for r in result.ranks}
    median = statistics.median(busy.values())
    slow = max(busy, key=lambda k: busy[k])
    excess = busy[slow] - median
    if busy[slow] < median * STRAGGLER_RATIO or excess < STRAGGLER_MIN_US:
        return []
    worst, worst_loss = None, 0.0
    for line in result.lines:
        mine = next((p for p in line.per_rank if p.rank == slow), None)
        if mine is None:
            continue
        others = [p.self_time_us - p.collective_us for p in line.per_rank]
        loss = (mine.self_time_us - mine.collective_us) - statistics.median(others)
        if loss > worst_loss:
            worst, worst_loss = line, loss
    if worst is None:
        return []
    node_of = {r.rank: r.node for r in result.ranks}
    waiters = sorted(((r.wait_us, r.rank) for r in result.ranks if r.rank != slow), reverse=True)
    waiting = ", ".join(f"{rank_name(k, node_of.get(k))} {figures.time_us(w)}" for w, k in waiters if w > 0)
    pct = 100.0 * excess / median if median > 0 else 0.0
    who = rank_name(slow, node_of.get(slow))
    line_median = statistics.median([p.self_time_us - p.collective_us for p in worst.per_rank])
    on_line = f"{who}: +{100.0 * worst_loss / line_median:.0f}% on this line, " if line_median > 0 else ""
    title = who if node_of.get(slow) else who.capitalize()
    message = (
        f"{title} is the straggler: {figures.time_us(busy[slow])} of compute per step "
        f"(outside collectives), {figures.pct(pct)} over the median rank ({figures.time_us(median)}); "
        f"it loses the most on this line "
        f"({on_line}+{figures.time_us(worst_loss)} against the median rank)"
    )
    message += f"; the others wait for it in collectives ({waiting})." if waiting else "."
    return [
        Finding(
            kind="straggler",
            severity="warning",
            file=worst.file,
            line=worst.line,
            message=message,
            fix="balance the work across ranks (equal shards, equal sequence lengths), "
            "or look at why this rank's line is slower",
        )
    ]

"""A line's recent history for its hover: the last runs of its function, each with
when it ran, the commit it measured and what the line cost (the median of its
steps, fwd + bwd), and a sparkline.

Lines are paired across runs as ``analysis.compare.match_lines`` pairs them (the
same text and number, the text moved, or the number edited), so a line keeps
its history while the code around it changes.
"""

from __future__ import annotations

import statistics

from trainium_lens.analysis.compare import match_lines
from trainium_lens.lsp.present import format as fmt
from trainium_lens.lsp.present.markdown import code, escape
from trainium_lens.model import figures
from trainium_lens.model.lines import LineStat
from trainium_lens.model.result import Result

SHOWN = 6  # runs in the hover's table
SPARK = "▁▂▃▄▅▆▇█"


def sparkline(values: list[float | None]) -> str:
    """One block per run, scaled from the smallest to the largest; ``·`` where the
    line did not exist in that run."""
    known = [v for v in values if v is not None]
    if not known:
        return ""
    low, high = min(known), max(known)
    out = []
    for v in values:
        if v is None:
            out.append("·")
        elif high <= low:
            out.append(SPARK[len(SPARK) // 2])
        else:
            out.append(SPARK[round((v - low) / (high - low) * (len(SPARK) - 1))])
    return "".join(out)


def cost(stat: LineStat) -> float:
    """A line's cost in one run for its history: the median of its per-step
    samples (fwd + bwd), so a burst of load in a few steps of one run does not
    make a trend; the mean (``time_us``) for a result without samples."""
    return statistics.median(stat.step_us) if stat.step_us else stat.time_us


def line_costs(history: list[Result], result: Result, stat: LineStat) -> list[float | None]:
    """What ``stat``'s line cost (``cost``) in each run of ``history`` (oldest
    first), up to ``result``; None where the line had no figure."""
    out: list[float | None] = []
    for run in history:
        if run.run_id == result.run_id:
            out.append(cost(stat))
            break
        mine = [s for s in result.lines if s.file == stat.file]
        theirs = [s for s in run.lines if s.file == stat.file]
        match = next((b for b, a, _st in match_lines(theirs, mine) if a is stat and b is not None), None)
        out.append(cost(match) if match else None)
    return out


def section(history: list[Result], result: Result, stat: LineStat) -> str | None:
    """Markdown for the hover, or None with fewer than two runs."""
    if len(history) < 2 or all(r.run_id != result.run_id for r in history):
        return None
    upto = [r for r in history if r.created_at <= result.created_at or r.run_id == result.run_id]
    costs = line_costs(upto, result, stat)
    runs = upto[-len(costs) :]
    clock = fmt.clock_suffix(result)
    rows = ["| when (UTC) | commit | line (median step) |", "| --- | --- | ---: |"]
    for run, cost in list(zip(runs, costs, strict=True))[-SHOWN:][::-1]:
        when = escape(run.created_at.replace("T", " ")[:16])
        mark = " ← this run" if run.run_id == result.run_id else ""
        rows.append(
            f"| {when} | {code(run.git.short, in_table=True)} | "
            f"{figures.time_us(cost) + clock if cost is not None else '–'}{mark} |"
        )
    spark = sparkline(costs[-12:])
    return f"**history** (last {min(len(costs), 12)} runs, oldest → newest): `{spark}`\n\n" + "\n".join(rows)

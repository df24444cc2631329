"""Editor words around figures: plurals, deltas, clocks, headlines. The figures
themselves read as ``model/figures`` writes them (one rule for every surface).

A CPU or CUDA figure always carries its clock so it never reads as Neuron
device time (the product's promise: docs/figures.md, "Backends and clocks").
"""

from __future__ import annotations

from trainium_lens.model import figures
from trainium_lens.model.result import Result

plural = figures.plural  # one rule for every surface (model/figures.py)


def clock_suffix(result: Result) -> str:
    """Empty for Neuron device time, else `` cpu`` / `` cuda``."""
    return "" if result.clock == "neuron" else f" {result.clock}"


def delta(before_us: float, after_us: float) -> str | None:
    """``▼ 38%`` (faster) / ``▲ 12%`` (slower); None when either side is empty."""
    if before_us <= 0 or after_us <= 0:
        return None
    change = (after_us - before_us) / before_us
    if abs(change) < 0.005:
        return "= 0%"
    return f"{'▼' if change < 0 else '▲'} {figures.pct(abs(change) * 100)}"


def headline(result: Result) -> str:
    """``2.36 ms neuron · 6 dispatches · 2 findings``: the clock is always named; the
    time is one call's, as reconciled (cpu: ops + host between them)."""
    parts = [f"{figures.time_us(result.per_call_us)} {result.clock}"]
    if result.totals.dispatches:
        parts.append(plural(result.totals.dispatches, "dispatch", "dispatches"))
    parts.append(plural(len(result.findings), "finding"))
    return " · ".join(parts)

"""How figures read in the editor: times, counts, clocks, headlines.

A CPU or CUDA figure always carries its clock so it never reads as Neuron
device time (the product's promise: docs/figures.md, "Backends and clocks").
"""

from __future__ import annotations

from trainium_lens.model.result import Result


def time_us(us: float) -> str:
    """``12 µs``, ``1.16 ms``, ``2.4 s``: three significant figures at most."""
    if us < 0:
        return "-" + time_us(-us)
    if us < 1000:
        return f"{_sig(us)} µs"
    if us < 1_000_000:
        return f"{_sig(us / 1000)} ms"
    return f"{_sig(us / 1_000_000)} s"


def _sig(value: float) -> str:
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}".rstrip("0").rstrip(".")
    return f"{value:.2f}".rstrip("0").rstrip(".")


def count(value: float) -> str:
    """Per-step counts are averages: whole numbers print without decimals."""
    if abs(value - round(value)) < 1e-6:
        return str(int(round(value)))
    return f"{value:.1f}"


def plural(value: float, word: str, words: str | None = None) -> str:
    return f"{count(value)} {word if abs(value - 1) < 1e-6 else (words or word + 's')}"


def share(part: float, whole: float) -> str:
    if whole <= 0:
        return "–"
    pct = 100 * part / whole
    return f"{pct:.0f}%" if pct >= 1 or pct == 0 else "<1%"


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
    return f"{'▼' if change < 0 else '▲'} {abs(change) * 100:.0f}%"


def headline(result: Result) -> str:
    """``2.36 ms neuron · 6 dispatches · 2 findings``: the clock is always named; the
    time is one call's, as reconciled (cpu: ops + host between them)."""
    parts = [f"{time_us(result.per_call_us)} {result.clock}"]
    if result.totals.dispatches:
        parts.append(plural(result.totals.dispatches, "dispatch", "dispatches"))
    parts.append(plural(len(result.findings), "finding"))
    return " · ".join(parts)

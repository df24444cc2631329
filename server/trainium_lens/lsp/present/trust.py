"""How far a result's figures can be trusted, in the editor's words: the
reconciliation with the unprofiled wall, the calibration, and the noise
verdict (``analysis/reconcile.py``, ``analysis/noise.py``)."""

from __future__ import annotations

from trainium_lens.lsp.present.markdown import escape
from trainium_lens.model import figures
from trainium_lens.model.fit import mostly_fit_text
from trainium_lens.model.lines import LineStat
from trainium_lens.model.result import Result

NOISY = "noisy_measurement"
OUTSIDE_LOAD = "outside_load"  # analysis/noise.py: measured under another job's load


def unreliable(result: Result) -> bool:
    """The run was judged noisy: its hints are drawn as unreliable."""
    return any(f.kind == NOISY for f in result.findings)


def reconciled(result: Result) -> str | None:
    """``0.88× the unprofiled wall 16.8 µs (within ±25%)``."""
    rec = result.reconciliation
    if rec is None:
        return None
    ref = "device-side span" if rec.reference == "device_span" else "unprofiled wall"
    tol = f"±{rec.tolerance:.0%}" if result.clock == "cpu" else f"at most +{rec.tolerance:.0%}"
    verdict = f"within {tol}" if rec.within else f"**outside** {tol}"
    if not rec.within and result.clock == "cpu" and abs(rec.ratio - 1) <= rec.tolerance:
        verdict = f"within {tol}, **not reconciled**"  # the figure shown or the host's speed did not hold
    note = f"; {escape(rec.note)}" if rec.note else ""
    unfitted = "unfitted " if rec.shown_us is not None else ""  # the figure shown meets the wall by its fit
    return (
        f"{unfitted}{figures.time_us(rec.profiled_us)} per {result.unit} = {figures.ratio(rec.ratio)} "
        f"the {ref} {figures.time_us(rec.reference_us)} ({verdict}{note})"
    )


def raw_beside(stat: LineStat, result: Result) -> str:
    """`` (raw 1.7 µs)`` where calibration changed the line's figure."""
    if result.calibration is None or result.clock != "cpu":
        return ""
    raw = stat.self_cpu_us + stat.backward_self_cpu_us
    shown = stat.self_time_us + stat.backward_self_time_us
    if raw <= 0 or abs(raw - shown) < 0.005 * raw:
        return ""
    return f" (raw {figures.time_us(raw)})"


def host_text(stat: LineStat, result: Result) -> str | None:
    """``host before its ops 3.2 µs``: Python (or the autograd engine) this line
    spends between ops, in the wall but in no op's time (cpu clock)."""
    if (
        result.totals.host_time_us is None
        or stat.host_time_us <= 0
        or figures.is_zero_time(stat.host_time_us)
    ):
        return None
    return f"host before its ops {figures.time_us(stat.host_time_us)} (Python between ops, in no op's time)"


def hover_section(result: Result) -> str | None:
    """The hover's paragraph on trust: noisy first (it overrides), then the ratio."""
    out = []
    for f in result.findings:
        if f.kind == NOISY:
            out.append(f"⚠ **Unreliable figures**: {escape(f.message)}")
        elif f.kind == OUTSIDE_LOAD:
            out.append(f"⚠ **Under outside load**: {escape(f.message)}")
    fitted = mostly_fit_text(result.fit, result.unit)
    if fitted:
        out.append(f"⚠ **Mostly fitted**: {escape(fitted)}")
    rec = reconciled(result)
    if rec:
        out.append(f"function: {rec}")
    cal = result.calibration
    if cal is not None:
        out.append(
            f"calibrated: the profiler's own cost ({figures.time_us(cal.per_depth_us)} per op event "
            f"per nesting level, measured on this host) is subtracted; raw figures beside"
        )
    return "\n\n".join(out) if out else None

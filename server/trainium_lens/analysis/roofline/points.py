"""Per-line roofline figures, as pure functions of a result and its roof.

For a line (forward, and separately the backward its forward ops caused,
recompute included) with FLOPs ``F``, bytes ``B`` and time ``t`` (primary clock):

* achieved FLOP/s ``F/t`` and bytes/s ``B/t``; arithmetic intensity ``F/B``;
* the roofline bound ``t_roof = max(F / peak_flops(dtype), B / bandwidth)``:
  the least time the device needs for that work. ``bound`` names the larger
  term (``compute`` or ``memory``); ``efficiency = t_roof / t`` is the share of
  the roof the line reached — its % of peak of the binding resource;
* time: the median over the measured steps (a preempted step on a busy host
  would otherwise read as overhead);
* verdict: far below the roof (efficiency < ``OVERHEAD_BELOW``, 10 %: more than
  ten times what the work needs) it is ``overhead-bound`` when the line's ops
  are tiny (the roof allows each less than ``TINY_OP_US``, 20 µs: launches and
  dispatch dominate) and ``below-roof`` otherwise (big ops running slowly: a
  busy host, a slow kernel for these shapes, a peak that does not apply);
  otherwise ``compute-bound`` or ``memory-bound`` by ``bound``.

Bytes are an estimate (inputs + outputs of the line's ops: caches and fusion
move less), so a memory-bound line can read above 100 % of bandwidth; the
figure is shown as is, with the estimate named.

Function MFU: the function's FLOPs per call over its unprofiled wall time
(the profiled self time when there is none), against the peak of its
dominant dtype.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainium_lens.analysis.roofline.peaks import peak_for, resolve
from trainium_lens.model.evidence import Roof
from trainium_lens.model.lines import LineStat
from trainium_lens.model.result import Result

OVERHEAD_BELOW = 0.10
TINY_OP_US = 20.0
ABOVE_ROOF_NOTE = (
    "above 100%: faster than the roof allows — the bytes are an estimate (data that stays in "
    "cache moves faster than memory bandwidth), or a measured roof was taken on a busy host "
    "(delete cpu-roof.json in the cache folder to measure it again)"
)
# FLOPs are counted from shapes, not estimated: above the peak, the time or the roof is off
ABOVE_FLOPS_NOTE = (
    "above 100% of the FLOP/s peak: the FLOPs are exact counts from the ops' shapes, so either the "
    "measured roof is low (taken on a busy host: delete cpu-roof.json in the cache folder to measure "
    "it again) or the line's time missed part of its work (the run's warnings name which)"
)


def above_notes(points: list[LineRoof]) -> list[str]:
    """The notes for the points above 100%, each naming the measure that can be off."""
    notes = []
    if any(p.bound == "compute" and p.flops_pct > 100 for p in points):
        notes.append(ABOVE_FLOPS_NOTE)
    if any(p.bound == "memory" and p.bytes_pct > 100 for p in points):
        notes.append(ABOVE_ROOF_NOTE)
    return notes


@dataclass
class LineRoof:
    phase: str  # "forward" | "backward" | "step" (both)
    time_us: float
    flops: float
    bytes: float
    dtype: str  # whose peak applies
    peak_flops: float
    peak_bytes_per_s: float
    roof_us: float  # the least time this work needs on this device
    ops: float = 1.0  # ops dispatched for this work per call (the line's own, or its backward's)

    @property
    def flops_per_s(self) -> float:
        return self.flops / (self.time_us * 1e-6) if self.time_us > 0 else 0.0

    @property
    def bytes_per_s(self) -> float:
        return self.bytes / (self.time_us * 1e-6) if self.time_us > 0 else 0.0

    @property
    def intensity(self) -> float | None:
        return self.flops / self.bytes if self.bytes > 0 else None

    @property
    def flops_pct(self) -> float:
        return 100 * self.flops_per_s / self.peak_flops if self.peak_flops else 0.0

    @property
    def bytes_pct(self) -> float:
        return 100 * self.bytes_per_s / self.peak_bytes_per_s if self.peak_bytes_per_s else 0.0

    @property
    def bound(self) -> str:
        compute = self.flops / self.peak_flops if self.peak_flops else 0.0
        memory = self.bytes / self.peak_bytes_per_s if self.peak_bytes_per_s else 0.0
        return "compute" if compute >= memory else "memory"

    @property
    def efficiency(self) -> float:
        return self.roof_us / self.time_us if self.time_us > 0 else 0.0

    @property
    def pct_of_peak(self) -> float:
        """% of the binding resource's peak (FLOP/s if compute-bound, bytes/s if memory-bound)."""
        return self.flops_pct if self.bound == "compute" else self.bytes_pct

    @property
    def verdict(self) -> str:
        if self.efficiency < OVERHEAD_BELOW:
            return "overhead-bound" if self.roof_us / max(self.ops, 1.0) < TINY_OP_US else "below-roof"
        return f"{self.bound}-bound"


def _make(
    phase: str, time_us: float, flops: float, bytes_: float, dtype: str | None, roof: Roof, ops: float
) -> LineRoof:
    peak, used = peak_for(roof, dtype)
    bw = roof.bytes_per_s
    roof_s = max(flops / peak if peak else 0.0, bytes_ / bw if bw else 0.0)
    return LineRoof(phase, time_us, flops, bytes_, used, peak, bw, roof_s * 1e6, ops)


def _forward_ops(stat: LineStat) -> float:
    direct = sum(op.direct_calls for op in stat.ops)
    return direct or stat.calls or 1.0


def _backward_ops(stat: LineStat) -> float:
    ops = list(stat.backward_ops) + list(stat.recompute_ops)
    return sum(op.direct_calls for op in ops) or sum(op.calls for op in ops) or 1.0


def has_work(stat: LineStat) -> bool:
    return bool(stat.flops or stat.bytes or stat.backward_flops or stat.backward_bytes)


def line_roofs(result: Result, stat: LineStat, roof: Roof | None = None) -> list[LineRoof]:
    """The line's forward and backward points (those with work and time)."""
    roof = roof or resolve(result)
    if roof is None or not has_work(stat):
        return []
    out = []
    fwd_t = stat.self_time_us_median or stat.self_time_us
    if (stat.flops or stat.bytes) and fwd_t > 0:
        out.append(
            _make(
                "forward", fwd_t, stat.flops or 0.0, stat.bytes or 0.0, stat.dtype, roof, _forward_ops(stat)
            )
        )
    back_t = (stat.backward_self_time_us_median or stat.backward_self_time_us) + stat.recompute_time_us
    if (stat.backward_flops or stat.backward_bytes) and back_t > 0:
        out.append(
            _make(
                "backward",
                back_t,
                stat.backward_flops or 0.0,
                stat.backward_bytes or 0.0,
                stat.dtype,
                roof,
                _backward_ops(stat),
            )
        )
    return out


def step_roof(result: Result, stat: LineStat, roof: Roof | None = None) -> LineRoof | None:
    """Forward and backward together: the line's one figure for a hint."""
    roof = roof or resolve(result)
    time_us = line_time_us(stat)
    if roof is None or not has_work(stat) or time_us <= 0:
        return None
    flops = (stat.flops or 0.0) + (stat.backward_flops or 0.0)
    bytes_ = (stat.bytes or 0.0) + (stat.backward_bytes or 0.0)
    ops = _forward_ops(stat) + (_backward_ops(stat) if stat.backward_ops or stat.recompute_ops else 0.0)
    return _make("step", time_us, flops, bytes_, stat.dtype, roof, ops)


def line_time_us(stat: LineStat) -> float:
    """Forward + backward + recompute, by the medians over the measured steps where
    the result has them (one preempted step on a busy host must not make a line
    look overhead-bound)."""
    fwd = stat.self_time_us_median or stat.self_time_us
    bwd = stat.backward_self_time_us_median or stat.backward_self_time_us
    return fwd + bwd + stat.recompute_time_us


@dataclass
class Mfu:
    mfu: float  # fraction of the dtype's peak
    flops: float  # per call
    time_us: float
    basis: str  # which time: "unprofiled wall" | "profiled self time"
    dtype: str
    peak_flops: float


def function_mfu(result: Result, roof: Roof | None = None) -> Mfu | None:
    roof = roof or resolve(result)
    work = result.work
    if roof is None or work is None or not work.flops:
        return None
    if result.totals.wall_us_median:
        time_us, basis = result.totals.wall_us_median, "unprofiled wall time"
    else:
        time_us, basis = result.totals.self_time_us, "profiled self time"
    if time_us <= 0:
        return None
    by_dtype: dict[str, float] = {}
    for s in result.lines:
        if s.dtype:
            by_dtype[s.dtype] = by_dtype.get(s.dtype, 0.0) + (s.flops or 0) + (s.backward_flops or 0)
    dtype = max(by_dtype, key=lambda d: by_dtype[d]) if by_dtype else None
    peak, used = peak_for(roof, dtype)
    return Mfu(work.flops / (time_us * 1e-6) / peak, work.flops, time_us, basis, used, peak)

"""The trace of a torchrun job (``--nproc N``), for the built-in timeline and the
Perfetto export: one lane group per rank, each rank's trace shifted so that its
first profiled step starts at the same instant (ranks are separate processes,
on a host or several: their traces' clocks need not agree, and the steps are
what the ranks have in common)."""

from __future__ import annotations

from collections.abc import Callable

from trainium_lens.model.ranks import rank_name, rank_result
from trainium_lens.model.result import Result
from trainium_lens.traces.chrome import STEP_RE, Event, Lane, Trace


def step_start(trace: Trace) -> float:
    """Where the rank's first ``ProfilerStep#N`` begins (else its first event)."""
    starts = [ev.start for ev in trace.events if STEP_RE.match(ev.name)]
    return min(starts) if starts else trace.t0


def merged_trace(result: Result, load: Callable[[Result], Trace]) -> Trace:
    """Every rank's trace (``load(rank_result)``) as lane groups ``rank k · ...``,
    aligned on the step start; the merged clock starts at 0 = that start."""
    lanes: list[Lane] = []
    events: list[Event] = []
    for run in sorted(result.ranks, key=lambda r: r.rank):
        trace = load(rank_result(result, run.rank))
        origin = step_start(trace)
        base = len(lanes)
        for lane in trace.lanes:
            lanes.append(
                Lane(
                    lane.kind,
                    f"{rank_name(run.rank, run.node)} · {lane.name}",
                    (f"rank{run.rank}:{lane.source[0]}", lane.source[1]),
                    lane.rows,
                )
            )
        for ev in trace.events:
            events.append(
                Event(ev.lane + base, ev.start - origin, ev.dur, ev.name, ev.cat, ev.line, ev.depth, ev.args)
            )
    t0 = min((ev.start for ev in events), default=0.0)
    t1 = max((ev.start + ev.dur for ev in events), default=0.0)
    return Trace(lanes, events, t0, t1, {"ranks": len(result.ranks)})

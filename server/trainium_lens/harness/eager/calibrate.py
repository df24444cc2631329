"""Calibrate the CPU clock: the profiler's own cost per op event, on this host,
under the run's profiler settings (as Python's ``profile`` module calibrates
its per-event overhead before it subtracts it).

With the profiler on, every op records an event: a few hundred nanoseconds of
callbacks around and inside it. On the ``cpu`` clock an op's self time is its
CPU time between its own timestamps, so that cost lands inside the figures,
and a line of small ops reads up to twice its real cost. It grows with the
op's depth (an event nested in other ops adds its bookkeeping to every level's
window it sits in): measured, the cost is proportional to the event's depth,
``cost = per_depth × depth`` (depth 0 for the op the user's line called, whose
callbacks fall outside any op's window, 1 for an op inside it, and so on).
Four workloads of 33–161 events at depths 1–4 agreed within 10% on this
2-core host (0.078–0.084 µs per depth level); a constant per event did not
(0.08–0.22 µs) and under-read nested composites such as ``torch.rms_norm``.

Measured on workloads whose whole body is one C++ call, so that the
unprofiled time holds no Python between ops: ``torch._foreach_*`` over many
tiny tensors (64 depth-1 events under one op), the same over bfloat16 tensors
with a scalar (each element adds, converts and copies: depth 1–4), and
``_foreach_norm`` (depth 1–2). For each, ``Σ self time of its events (profiled)
− its unprofiled time`` (medians over ``REPS`` calls) is the profiler's cost;
``per_depth`` is their sum over the workloads' summed depths.

Device clocks are not calibrated: kernel time does not include host callbacks.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

REPS = 40
WARM = 5


def _workloads(torch: Any) -> dict[str, Any]:
    tiny = [torch.zeros(1) for _ in range(64)]
    half = [torch.zeros(8, dtype=torch.bfloat16) for _ in range(32)]
    return {
        "foreach_neg": lambda: torch._foreach_neg(tiny),
        "foreach_sqrt": lambda: torch._foreach_sqrt(half),
        "foreach_norm": lambda: torch._foreach_norm(half),
        "foreach_add_bf16": lambda: torch._foreach_add(half, 1.0),
    }


def _unprofiled_us(fn: Any) -> float:
    for _ in range(WARM):
        fn()
    times = []
    for _ in range(REPS):
        t0 = time.perf_counter_ns()
        fn()
        times.append((time.perf_counter_ns() - t0) / 1000.0)
    return statistics.median(times)


def _trees(raw: list) -> dict[str, list[tuple[float, int, int]]]:
    """Per top-level op name: (Σ self time µs, events, Σ depth) of each call's tree.

    From the profiler's raw events (``kineto_results.events()``): nesting by time
    containment on each thread. ``prof.events()`` would build the same tree in
    Python at about a millisecond per 5 events on a busy host: this is 200× less."""
    by_thread: dict[int, list[tuple[int, int, str]]] = {}
    for e in raw:
        name = e.name()
        if "::" not in name:
            continue
        start = e.start_ns()
        by_thread.setdefault(e.start_thread_id(), []).append((start, -(start + e.duration_ns()), name))
    out: dict[str, list[tuple[float, int, int]]] = {}
    for events in by_thread.values():
        events.sort()
        stack: list[list] = []  # [end, child time, depth, root entry, elapsed, name]
        for start, neg_end, name in events:
            end = -neg_end
            while stack and stack[-1][0] <= start:
                _close(stack.pop())
            if stack and stack[-1][5] == name:
                continue  # a redispatch of its parent: one event in prof.events() too
            depth = len(stack)
            if depth == 0:
                entry = [0.0, 0, 0]
                out.setdefault(name, []).append(entry)  # type: ignore[arg-type]
            else:
                stack[-1][1] += end - start
                entry = stack[-1][3]
            stack.append([end, 0, depth, entry, end - start, name])
        while stack:
            _close(stack.pop())
    return {name: [(e[0], e[1], e[2]) for e in entries] for name, entries in out.items()}


def _close(frame: list) -> None:
    _end, child, depth, entry, elapsed, _name = frame
    entry[0] += (elapsed - child) / 1000.0
    entry[1] += 1
    entry[2] += depth


def start_profiler(torch: Any, activities: list, profiler_kwargs: dict) -> float:
    """Start and stop the profiler once, empty; seconds it took. The first start in
    a process initialises the profiler's backend (1–4 s on a busy 2-core host):
    paid here, before any function is measured, a later step's start is cheap
    and leaves no long pause before the measured calls (steady.py)."""
    t0 = time.perf_counter()
    with torch.profiler.profile(activities=activities, **profiler_kwargs):
        pass
    return time.perf_counter() - t0


def calibrate(torch: Any, activities: list, profiler_kwargs: dict) -> dict:
    """The ``calibration`` block of every cpu-clock result of this run."""
    start_s = start_profiler(torch, activities, profiler_kwargs)
    t0 = time.perf_counter()
    work = _workloads(torch)
    plain = {name: _unprofiled_us(fn) for name, fn in work.items()}
    with torch.profiler.profile(activities=activities, **profiler_kwargs) as prof:
        for fn in work.values():
            for _ in range(REPS):
                fn()
    by_op = _trees(prof.profiler.kineto_results.events())
    rows: list[tuple[int, int, float]] = []
    table = []
    names = {
        "foreach_neg": "aten::_foreach_neg",
        "foreach_sqrt": "aten::_foreach_sqrt",
        "foreach_norm": "aten::_foreach_norm",
        "foreach_add_bf16": "aten::_foreach_add",
    }
    for name, op in names.items():
        trees = by_op.get(op) or []
        if not trees:
            continue
        profiled = statistics.median(t[0] for t in trees)
        events, depths = trees[0][1], trees[0][2]
        cost = max(0.0, profiled - plain[name])
        rows.append((events, depths, cost))
        table.append(
            {
                "workload": name,
                "events": events,
                "unprofiled_us": round(plain[name], 3),
                "profiled_us": round(profiled, 3),
            }
        )
    depths = sum(d for _e, d, _c in rows)
    per_depth = sum(c for _e, _d, c in rows) / depths if depths else 0.0
    return {
        "per_depth_us": round(per_depth, 4),
        "cost_s": round(time.perf_counter() - t0, 3),  # the calibration itself
        "profiler_start_s": round(start_s, 3),  # the profiler's first start (paid once anyway)
        "workloads": table,
    }

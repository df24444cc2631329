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

A top-level op's callbacks fall *between* ops instead: they are in the gaps
from which the host time between ops is read (``tree.py``). ``per_top`` is
that cost, from a Python loop of 64 tiny top-level ops timed with and without
the profiler (the whole difference, divided by the ops). And the Python in
those gaps itself runs slower while the profiler records: ``gap_factor``, from
a small stack of ``nn.Module`` blocks, divides what is left.

Device clocks are not calibrated: kernel time does not include host callbacks.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

REPS = 20  # calls per workload and round
ROUNDS = 3
WARM = 5
FLAT = 64


def _workloads(torch: Any) -> dict[str, Any]:
    tiny = [torch.zeros(1) for _ in range(64)]
    half = [torch.zeros(8, dtype=torch.bfloat16) for _ in range(32)]
    return {
        "foreach_neg": lambda: torch._foreach_neg(tiny),
        "foreach_sqrt": lambda: torch._foreach_sqrt(half),
        "foreach_norm": lambda: torch._foreach_norm(half),
        "foreach_add_bf16": lambda: torch._foreach_add(half, 1.0),
    }


def _flat_loop(torch: Any) -> Any:
    """A Python loop of 64 top-level ops: what lies *between* ops (torch.profiler's
    out-of-window cost of a top-level event is in the gaps the host time reads)."""
    tiny = [torch.zeros(1) for _ in range(FLAT)]
    neg = torch.neg

    def loop() -> None:
        for t in tiny:
            neg(t)

    return loop


def _modules(torch: Any) -> Any:
    """Model code in miniature: eight Linear → GELU → LayerNorm blocks on a 2×8
    tensor, called through ``nn.Module`` (Python between every op)."""
    nn = torch.nn
    torch.manual_seed(0)
    blocks = [nn.Sequential(nn.Linear(8, 8), nn.GELU(), nn.LayerNorm(8)) for _ in range(8)]
    stack = nn.Sequential(*blocks).eval()
    x = torch.randn(2, 8)

    def forward() -> None:
        with torch.no_grad():
            stack(x)

    return forward


def _unprofiled_us(fn: Any, reps: int = REPS) -> float:
    for _ in range(WARM):
        fn()
    times = []
    for _ in range(reps):
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
    """The ``calibration`` block of every cpu-clock result of this run. On one
    intra-op thread: the costs measured are per event, and an OpenMP region
    waiting for a busy core would only add noise (the thread count is restored)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _calibrate(torch, activities, profiler_kwargs)
    finally:
        torch.set_num_threads(threads)


def _calibrate(torch: Any, activities: list, profiler_kwargs: dict) -> dict:
    start_s = start_profiler(torch, activities, profiler_kwargs)
    t0 = time.perf_counter()
    work = _workloads(torch)
    # rounds of (unprofiled, profiled), each a median: drift on a busy host cancels
    plains: dict[str, list[float]] = {name: [] for name in work}
    by_op: dict[str, list[tuple[float, int, int]]] = {}
    flat = _flat_loop(torch)
    flat_plain: list[float] = []
    flat_profiled: list[float] = []
    for _ in range(ROUNDS):
        for name, fn in work.items():
            plains[name].append(_unprofiled_us(fn))
        flat_plain.append(_unprofiled_us(flat, 3 * REPS))
        with torch.profiler.profile(activities=activities, **profiler_kwargs) as prof:
            for fn in work.values():
                for _ in range(REPS):
                    fn()
            flat_profiled.append(_unprofiled_us(flat, 3 * REPS))  # timed the same way, profiler on
        for op, trees in _trees(prof.profiler.kineto_results.events()).items():
            by_op.setdefault(op, []).extend(trees)
    plain = {name: statistics.median(v) for name, v in plains.items()}
    per_top = max(0.0, (statistics.median(flat_profiled) - statistics.median(flat_plain)) / FLAT)
    per_depth = _per_depth(by_op, plain)
    gap_factor = _gap_factor(torch, activities, profiler_kwargs, per_depth, per_top)
    return {
        "per_depth_us": round(per_depth, 4),
        "per_top_us": round(per_top, 4),
        "gap_factor": round(gap_factor, 3),
        "cost_s": round(time.perf_counter() - t0, 3),  # the calibration itself
        "profiler_start_s": round(start_s, 3),  # the profiler's first start (paid once anyway)
        "workloads": _table(by_op, plain),
    }


_NAMES = {
    "foreach_neg": "aten::_foreach_neg",
    "foreach_sqrt": "aten::_foreach_sqrt",
    "foreach_norm": "aten::_foreach_norm",
    "foreach_add_bf16": "aten::_foreach_add",
}


def _per_depth(by_op: dict, plain: dict) -> float:
    cost = depths = 0.0
    for name, op in _NAMES.items():
        trees = by_op.get(op) or []
        if trees:
            cost += max(0.0, statistics.median(t[0] for t in trees) - plain[name])
            depths += trees[0][2]
    return cost / depths if depths else 0.0


def _table(by_op: dict, plain: dict) -> list[dict]:
    out = []
    for name, op in _NAMES.items():
        trees = by_op.get(op) or []
        if trees:
            out.append(
                {
                    "workload": name,
                    "events": trees[0][1],
                    "unprofiled_us": round(plain[name], 3),
                    "profiled_us": round(statistics.median(t[0] for t in trees), 3),
                }
            )
    return out


def _gap_factor(torch: Any, activities: list, kwargs: dict, per_depth: float, per_top: float) -> float:
    """How much longer the host time between ops is under the profiler than
    without it, on model-like code (``_modules``): the profiled gaps, less
    ``per_top`` per top-level op, over the unprofiled wall less the calibrated op
    time. Python between ops runs slower while the profiler records (its buffers
    take the caches): 1.2–1.5 on this host's small models."""
    fn = _modules(torch)
    factors = []
    for _ in range(ROUNDS):
        plain = _unprofiled_us(fn, 2 * REPS)
        with torch.profiler.profile(activities=activities, **kwargs) as prof:
            profiled = _unprofiled_us(fn, 2 * REPS)
        trees = [t for ts in _trees(prof.profiler.kineto_results.events()).values() for t in ts]
        calls = WARM + 2 * REPS
        selfsum = sum(t[0] for t in trees) / calls
        depths = sum(t[2] for t in trees) / calls
        tops = len(trees) / calls
        host_unprofiled = plain - (selfsum - per_depth * depths)
        host_profiled = profiled - selfsum - per_top * tops
        if host_unprofiled > 0 and host_profiled > 0:
            factors.append(host_profiled / host_unprofiled)
    return min(3.0, max(1.0, statistics.median(factors))) if factors else 1.0

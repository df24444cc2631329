"""The untraced part of an asynchronous instruction's work on XLA's CPU runtime.

The thunk runtime traces each instruction with one event around its thunk's
``Execute``. A ``dot`` (and a ``convolution``) only *dispatches* there: its
Eigen contraction runs afterwards as tasks on the intra-op pool, with no event
of its own, and the runtime marks its completion with an ``end: <op>`` event
(docs/xla.md, "Asynchronous instructions"). Timed by its event alone, a 25
MFLOP dot read 54 µs (468 GFLOP/s on two cores: 2.7× the measured roof) while
its contraction ran, untraced, for the next 170 µs; backward lines, mostly
dots, read above 100 % of the FLOP/s peak.

So the work the pool's threads (``tf_XLAEigen``) did inside their task regions
(``ThreadpoolListener::StartRegion``..``StopRegion``) outside any traced
instruction and outside the thunk executor is given to the asynchronous
instruction in flight then (dispatched, its ``end:`` not yet seen); when several
are, to the one that completes first (the pool runs tasks in the order they
came). Work no instruction was in flight for stays untraced. An instruction's
time is then its event plus those pieces (a union, as its partitions' time).
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Iterable

from trainium_lens.harness.xla.xplane import Capture, Executed

# the intra-op pool's workers (the PjRt client's threads hold a region while they wait
# for a whole execution: not work)
POOL_THREAD = "tf_XLAEigen"
# an instruction is asynchronous when its work ends this long after its event (ns): a
# synchronous thunk's "end:" is emitted inside its event
ASYNC_AFTER_NS = 1000.0

Span = tuple[float, float]


def _merged(spans: Iterable[Span]) -> list[Span]:
    out: list[Span] = []
    for s, e in sorted(spans):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def _subtract(spans: list[Span], holes: Iterable[Span]) -> list[Span]:
    """Disjoint ``spans`` less ``holes``, in one sweep over both in time order."""
    gaps, out, j = _merged(holes), [], 0
    for s, e in sorted(spans):
        while j < len(gaps) and gaps[j][1] <= s:
            j += 1
        at, k = s, j
        while k < len(gaps) and gaps[k][0] < e:
            if gaps[k][0] > at:
                out.append((at, gaps[k][0]))
            at = max(at, gaps[k][1])
            k += 1
        if at < e:
            out.append((at, e))
    return out


def untraced(cap: Capture, events: list[Executed]) -> list[Span]:
    """Per thread, its task regions less its traced instructions and executor spans."""
    traced: dict[str, list[Span]] = {}
    for e in events:
        traced.setdefault(e.thread, []).append((e.start_ns, e.end_ns))
    pieces: list[Span] = []
    for thread, regions in cap.regions.items():
        if not thread.startswith(POOL_THREAD):
            continue
        holes = traced.get(thread, []) + cap.executors.get(thread, [])
        pieces += _subtract(sorted(regions), holes)
    return sorted(p for p in pieces if p[1] > p[0])


def completions(cap: Capture, events: list[Executed]) -> dict[int, float]:
    """Event index -> when its work completed, for the asynchronous ones."""
    out: dict[int, float] = {}
    for i, e in enumerate(events):
        ends = cap.ends.get(e.hlo_op)
        if not ends:
            continue
        k = bisect.bisect_left(ends, e.start_ns)
        if k < len(ends) and ends[k] > e.end_ns + ASYNC_AFTER_NS:
            out[i] = ends[k]
    return out


def _split(piece: Span, live: list[tuple[float, float, int]], out: dict[int, list[Span]]) -> None:
    """Give ``piece`` to the instructions of ``live`` (start, end, index) in flight over it."""
    todo = [piece]
    while todo:
        s, e = todo.pop()
        flying = [(end, i, start) for start, end, i in live if start < e and end > s]
        if not flying:
            continue
        end, i, start = min(flying)  # the first to complete
        a, b = max(s, start), min(e, end)
        out.setdefault(i, []).append((a, b))
        if s < a:
            todo.append((s, a))
        if b < e:
            todo.append((b, e))


def assign(cap: Capture, events: list[Executed]) -> dict[int, list[Span]]:
    """Event index -> the untraced pieces of work it gets. One sweep in time: the
    instructions in flight at a piece are few, whatever the number of pieces."""
    done = completions(cap, events)
    flights = sorted((events[i].start_ns, end, i) for i, end in done.items())
    out: dict[int, list[Span]] = {}
    if not flights:
        return out
    heap: list[tuple[float, float, int]] = []  # (end, start, index) of those dispatched
    k = 0
    for s, e in untraced(cap, events):  # by start
        while k < len(flights) and flights[k][0] < e:
            start, end, i = flights[k]
            heapq.heappush(heap, (end, start, i))
            k += 1
        while heap and heap[0][0] <= s:  # completed before this piece: before every later one too
            heapq.heappop(heap)
        _split((s, e), [(start, end, i) for end, start, i in heap], out)
    return out

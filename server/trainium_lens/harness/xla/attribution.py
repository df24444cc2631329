"""Executed HLO instructions → per-step time per instruction, and its credit.

With ``XLA_IR_DEBUG=1 XLA_HLO_DEBUG=1`` torch-xla records the Python stack of
every IR node; each HLO instruction's ``OpMetadata.stack_frame_id`` points into
the module's stack-frame index (1-based ids, 0 = none; each frame names its
parent). ``xla/credit.py`` decides where each optimized instruction's time goes
(its source line, the backward tag of the forward line that caused it, the
fusion rule, data flow, or a named bucket); this module joins that with what
the profiler saw run.

**Time** of one instruction in one step is the union of its *own* intervals: the
CPU runtime splits a big instruction into partitions on worker threads (union,
not sum), and a ``call`` (or ``while``) event encloses the events of the
instructions it runs on the same thread, so their time is taken off it (else
both would count). An asynchronous instruction (a ``dot``: its event only
dispatches the work) also gets the untraced work done while it was in flight
(``xla/async_work.py``). Lines' self times, the buckets and what is unattributed add
up to the sum of every executed instruction's own time.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable

from trainium_lens.harness.intervals import union_length
from trainium_lens.harness.xla.async_work import assign
from trainium_lens.harness.xla.credit import (
    FORWARD,
    Credit,
    Creditor,
    Place,
    Tags,
    XlaAttribution,
    no_tags,
    user_stack,
)
from trainium_lens.harness.xla.hlo import HloInstr, HloModule
from trainium_lens.harness.xla.xplane import Capture, Executed

__all__ = ["Credit", "XlaAttribution", "attribute", "credit", "user_stack"]

# The CPU runtime runs a big instruction's partitions on Eigen worker threads too:
# those events add time (union) but not executions.
PARTITION_THREAD = "tf_XLAEigen"


def credit(
    module: HloModule, ins: HloInstr, relpath: Callable[[str], str | None], tags: Tags = no_tags
) -> Credit:
    """One instruction's credit (``xla/credit.py``'s rules)."""
    return Creditor(module, relpath, tags).credit(ins)


def _union_us(intervals: list[tuple[float, float]]) -> float:
    return union_length(intervals) / 1000.0  # ns → µs


def own_intervals(events: list[Executed]) -> list[list[tuple[float, float]]]:
    """Per event, its interval less the events nested inside it on its thread."""
    out: list[list[tuple[float, float]]] = [[(e.start_ns, e.end_ns)] for e in events]
    by_thread: dict[str, list[int]] = {}
    for i, e in enumerate(events):
        by_thread.setdefault(e.thread, []).append(i)
    for indices in by_thread.values():
        indices.sort(key=lambda i: (events[i].start_ns, -events[i].end_ns))
        open_: list[int] = []
        children: dict[int, list[int]] = {}
        for i in indices:
            e = events[i]
            while open_ and events[open_[-1]].end_ns <= e.start_ns:
                open_.pop()
            if open_ and e.end_ns <= events[open_[-1]].end_ns:
                children.setdefault(open_[-1], []).append(i)
            open_.append(i)
        for parent, kids in children.items():
            out[parent] = _subtract(events[parent], [(events[k].start_ns, events[k].end_ns) for k in kids])
    return out


def _subtract(e: Executed, holes: list[tuple[float, float]]) -> list[tuple[float, float]]:
    pieces, at = [], e.start_ns
    for s, t in sorted(holes):
        if s > at:
            pieces.append((at, s))
        at = max(at, t)
    if at < e.end_ns:
        pieces.append((at, e.end_ns))
    return pieces


def attribute(
    cap: Capture,
    step_starts: list[float],
    relpath: Callable[[str], str | None],
    tags: Tags = no_tags,
    optimizer_places: dict[Place, str] | None = None,
    optimizer_calls: dict[str, int] | None = None,
) -> XlaAttribution:
    """Join executed instructions with the optimized HLO; ``step_starts``: the
    start (ns, profiler clock) of each measured step, in order; ``tags``: the
    backward tags the run set (``xla/tags.py``)."""
    att = XlaAttribution(
        steps=len(step_starts),
        optimizer_places=dict(optimizer_places or {}),
        optimizer_calls=dict(optimizer_calls or {}),
    )
    by_name: dict[str, HloModule] = {m.name: m for m in cap.modules.values()}
    creditors: dict[str, Creditor] = {}
    intervals: dict[tuple[int, tuple[str, str]], list[tuple[float, float]]] = {}
    runs: dict[tuple[int, tuple[str, str]], int] = {}
    events = [ev for ev in cap.executed if bisect.bisect_right(step_starts, ev.start_ns) > 0]
    owns = own_intervals(events)
    for i, pieces in assign(cap, events).items():  # an async dot's untraced contraction
        owns[i] = owns[i] + pieces
        att.pool_work.extend((events[i].hlo_op, piece) for piece in pieces)
    for ev, own in zip(events, owns, strict=True):
        step = bisect.bisect_right(step_starts, ev.start_ns) - 1
        module = cap.modules.get(ev.program_id) if ev.program_id is not None else None
        module = module or by_name.get(ev.hlo_module)
        if module is None:
            att.unknown.add(ev.hlo_op)
            continue
        att.graphs.add(module.name)
        key = (module.name, ev.hlo_op)
        ins = module.instruction(ev.hlo_op)
        if key not in att.credits:
            creditor = creditors.get(module.name)
            if creditor is None:
                creditor = creditors[module.name] = Creditor(module, relpath, tags)
            att.credits[key] = creditor.credit(ins) if ins else Credit([])
            if ins is not None:
                att.instrs[key] = ins
        intervals.setdefault((step, key), []).extend(own)
        if not ev.thread.startswith(PARTITION_THREAD):
            runs[(step, key)] = runs.get((step, key), 0) + 1
        stack = att.credits[key].stack
        if stack and att.credits[key].phase == FORWARD:
            att.windows.setdefault(stack[0], []).append((ev.start_ns, ev.end_ns))
    for sk, spans in intervals.items():
        att.time[sk] = _union_us(spans)
        att.calls[sk[1]] = att.calls.get(sk[1], 0) + max(1, runs.get(sk, 0))
    return att

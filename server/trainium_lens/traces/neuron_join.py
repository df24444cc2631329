"""Runtime executions → the host ops that submitted them → their source lines.

TorchNeuron runs ops asynchronously: an execution often starts on the device
after the *next* op has begun on the host, so joining by time (an execution goes
to the op that started last before it) misplaces device time. Where TorchNeuron
wrote its op map (``neuron_mapping.py``), each execution names its ops by
(``seq_nr``, ``th_id``). The rules below follow what TorchNeuron's source implies
(docs/neuron.md, "The exact join"); none is confirmed on a device yet:

* keys are per thread: ``th_id`` is PyTorch's thread counter (the trace's ``Torch
  thread`` tag, ``FunctionEvent.thread``), never the OS thread id, and each thread
  counts sequence numbers from 0 of its own;
* ``seq_nr`` was read when the op was *submitted*: an op that created an autograd
  node had already taken its number, so key ``k`` belongs to the op whose trace
  ``Sequence number`` is ``k - 1`` (the innermost such op: ``aten::linear`` and the
  ``aten::mm`` inside it record the same number);
* **exact**: a key that one execution alone names, with such an op on its thread,
  or a key whose stretch (below) holds one op only (an op run as several executions);
* **order**: a key several executions name (under ``no_grad``, and in backward,
  where no node is created, every op submits the same number): the executions,
  in runtime order, pair with the leaf ops of the key's stretch of the thread (from
  the op that took ``k - 1`` to the next op that records ``k``) in start order,
  when there are as many of each;
* **time**: otherwise within that stretch, and for an execution the map does not
  name or whose op is not in the trace, the time-window rule: the leaf op that
  started last before the execution began (on the key's thread, or any thread).

Where no map was written every execution goes through the time-window rule, and
the report says so (``JoinReport.join``). An execution several ops share
(concatenation) is split evenly among them: the map does not say more.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from trainium_lens.harness.labels import PHASE_KEY, SOURCE_KEY, THREAD_KEY, parse_label
from trainium_lens.traces.neuron_mapping import Execution, Mapping, OpKey

__all__ = ["Execution", "HostOp", "JoinReport", "host_ops", "join"]

RULES = ("exact", "order", "time")
Place = tuple[str, int]


@dataclass
class HostOp:
    name: str
    thread: int  # PyTorch's thread counter (0: not known)
    seq: int  # the trace's Sequence number (-1: none recorded)
    start_ns: int
    end_ns: int
    place: Place | None = None  # the line its time counts on (the harness's tag)
    phase: str = "forward"
    leaf: bool = True  # no other op starts inside it on its thread
    chain: tuple[Place, ...] = ()  # the user-line ranges open around it on its thread (totals)


@dataclass
class JoinReport:
    join: str  # "framework_mapping" or "time-window"
    reason: str = ""  # why the time-window join (no map, no ids, an untagged trace)
    op_ns: dict[int, float] = field(default_factory=dict)  # op index -> device ns
    line_ns: dict[tuple[Place, str], float] = field(default_factory=dict)  # (line, phase) -> ns
    # through the stack: every line range around a forward op (a backward op: its own line)
    total_ns: dict[tuple[Place, str], float] = field(default_factory=dict)
    executions: dict[str, int] = field(default_factory=lambda: dict.fromkeys(RULES, 0))
    ns: dict[str, float] = field(default_factory=lambda: dict.fromkeys(RULES, 0.0))
    unmatched: int = 0  # executions placed on no op
    unmatched_ns: float = 0.0
    unplaced_ns: float = 0.0  # placed on an op with no line
    ops_without_execution: int = 0  # leaf ops the map names no execution for

    def summary(self) -> str:
        total = sum(self.executions.values()) + self.unmatched
        parts = [f"{self.executions[r]} {r} ({self.ns[r] / 1e3:.1f} µs)" for r in RULES if self.executions[r]]
        placed = ", ".join(parts) if parts else "none placed"
        head = (
            "TorchNeuron's op map (framework_mapping)"
            if self.join == "framework_mapping"
            else f"the time-window join ({self.reason})"
        )
        return (
            f"device time joined to ops by {head}: {total} executions, {placed}, "
            f"{self.unmatched} unmatched ({self.unmatched_ns / 1e3:.1f} µs)"
        )


# -- host ops from the tagged Chrome trace ---------------------------------------


def host_ops(trace: dict[str, Any]) -> list[HostOp]:
    """The trace's ATen ops (``cpu_op``), in start order, with the harness's tags."""
    # torch writes ``ts`` in µs from ``baseTimeNanoseconds`` (absolute: base + ts)
    found = trace.get("baseTimeNanoseconds")
    base = found if isinstance(found, int) else 0
    ops: list[tuple[Any, HostOp]] = []
    ranges: list[tuple[Any, int, int, Place]] = []  # the harness's user-line ranges
    for ev in trace.get("traceEvents", ()):
        if not isinstance(ev, dict) or ev.get("ph") != "X":
            continue
        if ev.get("cat") == "user_annotation":
            label = parse_label(str(ev.get("name", "")))
            if label is not None and isinstance(ev.get("ts"), (int, float)):
                start = base + round(float(ev["ts"]) * 1000)
                end = start + round(float(ev.get("dur") or 0) * 1000)
                ranges.append((ev.get("tid"), start, end, label[:2]))
            continue
        if ev.get("cat") != "cpu_op":
            continue
        raw = ev.get("args")
        args: dict[str, Any] = raw if isinstance(raw, dict) else {}
        try:
            start = base + round(float(ev["ts"]) * 1000)
            end = start + round(float(ev.get("dur", 0)) * 1000)
        except (KeyError, TypeError, ValueError):
            continue
        seq = args.get("Sequence number")
        thread = args.get(THREAD_KEY)
        ops.append(
            (
                ev.get("tid"),
                HostOp(
                    str(ev.get("name", "")),
                    thread if isinstance(thread, int) else 0,
                    seq if isinstance(seq, int) else -1,
                    start,
                    end,
                    _place(args.get(SOURCE_KEY)),
                    str(args.get(PHASE_KEY) or "forward"),
                ),
            )
        )
    ops.sort(key=lambda p: (p[1].start_ns, -p[1].end_ns))
    _mark_leaves(ops)
    _chains(ops, ranges)
    return [op for _tid, op in ops]


def _chains(ops: list[tuple[Any, HostOp]], ranges: list[tuple[Any, int, int, Place]]) -> None:
    """Each op's enclosing user-line ranges on its thread (ranges and ops both in
    start order: one sweep per thread with a stack of the open ranges)."""
    by_tid: dict[Any, list[tuple[int, int, Place]]] = {}
    for tid, start, end, place in sorted(ranges, key=lambda r: (r[1], -r[2])):
        by_tid.setdefault(tid, []).append((start, end, place))
    at: dict[Any, int] = {}
    open_: dict[Any, list[tuple[int, int, Place]]] = {}
    for tid, op in ops:
        todo, k, stack = by_tid.get(tid, []), at.get(tid, 0), open_.setdefault(tid, [])
        while k < len(todo) and todo[k][0] <= op.start_ns:
            stack.append(todo[k])
            k += 1
        at[tid] = k
        stack[:] = [r for r in stack if r[1] >= op.start_ns]
        op.chain = tuple(r[2] for r in stack)


def _place(ref: Any) -> Place | None:
    if not isinstance(ref, str):
        return None
    file, _, num = ref.rpartition(":")
    return (file, int(num)) if file and num.isdigit() else None


def _mark_leaves(ops: list[tuple[Any, HostOp]]) -> None:  # in start order
    last: dict[Any, HostOp] = {}  # per thread: the op that began last
    for tid, op in ops:
        before = last.get(tid)
        # an op with children has its first child begin next on its thread
        if before is not None and before.start_ns <= op.start_ns < before.end_ns:
            before.leaf = False
        last[tid] = op


# -- the join --------------------------------------------------------------------


class _Thread:
    """One thread's ops in start order, indexed by recorded sequence number."""

    def __init__(self, ops: list[tuple[int, HostOp]]):
        self.ops = ops
        self.starts = [op.start_ns for _i, op in ops]
        self.by_seq: dict[int, list[int]] = {}  # seq -> positions in ops
        for pos, (_i, op) in enumerate(ops):
            if op.seq >= 0:
                self.by_seq.setdefault(op.seq, []).append(pos)

    def taker(self, key: int) -> int | None:
        """Position of the op that took ``key - 1`` (the innermost: the last to begin)."""
        found = self.by_seq.get(key - 1)
        return found[-1] if found else None

    def stretch(self, key: int) -> list[int]:
        """Op indices of what submitted under ``key``, in start order: the op that took
        ``key - 1`` (its kernel submits once), then the leaf ops after it up to the next
        op that records ``key`` or later. Empty when ``key`` lies outside the numbers the
        trace saw on this thread (an execution of a warm-up step, or of one after the
        profiled window). A thread that records no number (the autograd engine's, in
        backward) is one stretch."""
        first = self.taker(key)
        if first is not None:
            lo = first
        elif not self.by_seq:
            lo = 0
        elif key <= min(self.by_seq) or key > max(self.by_seq) + 1:
            return []
        else:  # a number the trace did not record: from the op before the gap
            lo = max(q for s, pos in self.by_seq.items() if s < key for q in pos) + 1
        later = [q for s, pos in self.by_seq.items() if s >= key for q in pos if q > lo]
        hi = min(later) if later else len(self.ops)
        out, after = [], -1
        if first is not None:
            out.append(self.ops[first][0])
            after = self.ops[first][1].end_ns
        out += [i for i, op in self.ops[lo:hi] if op.leaf and op.start_ns >= after and i not in out]
        return out


def _before(ops: list[HostOp], candidates: list[int], at_ns: int, first: bool = False) -> int | None:
    """The candidate op that began last at or before ``at_ns``; none began before it:
    the first candidate when ``first`` (within a key's stretch the map already chose
    these ops), else None (an execution before every op of the trace is not its)."""
    if not candidates:
        return None
    starts = [ops[i].start_ns for i in candidates]
    k = bisect.bisect_right(starts, at_ns) - 1
    if k < 0 and not first:
        return None
    return candidates[max(k, 0)]


def join(
    ops: list[HostOp], executions: Iterable[Execution], mapping: Mapping | None, reason: str = ""
) -> JoinReport:
    """Each execution's device time onto host ops and their lines (rules: module doc)."""
    execs = sorted(executions, key=lambda e: e.seq_id)
    leaves = [i for i, op in enumerate(ops) if op.leaf]
    if mapping is None or not any(op.thread for op in ops):
        why = reason or (
            "TorchNeuron wrote no framework_mapping file"
            if mapping is None
            else "the trace's ops carry no PyTorch thread id (Torch thread)"
        )
        report = JoinReport("time-window", why)
        for ex in execs:
            _credit(report, ops, [_before(ops, leaves, ex.start_ns)], ex, "time")
        return report
    report = JoinReport("framework_mapping")
    threads = {
        t: _Thread([(i, op) for i, op in enumerate(ops) if op.thread == t]) for t in {op.thread for op in ops}
    }
    named: dict[tuple[int, int], list[int]] = {}  # (key, thread) -> nrta_seq_ids naming it, in order
    for seq_id in sorted(mapping.executions):
        for key in mapping.executions[seq_id]:
            named.setdefault((key.seq_nr, key.th_id), []).append(seq_id)
    for ex in execs:
        keys = mapping.executions.get(ex.seq_id)
        if not keys:  # not in the map (a warm-up execution, a collective): by time
            _credit(report, ops, [_before(ops, leaves, ex.start_ns)], ex, "time")
            continue
        placed = [_resolve(k, ex, threads, named, ops) for k in keys]
        targets = [p[0] for p in placed]
        rule = max((p[1] for p in placed), key=RULES.index)
        _credit(report, ops, targets, ex, rule)
    hit = set(report.op_ns)
    report.ops_without_execution = sum(1 for i in leaves if i not in hit and ops[i].thread in threads)
    return report


def _resolve(
    key: OpKey, ex: Execution, threads: dict[int, _Thread], named: dict, ops: list[HostOp]
) -> tuple[int | None, str]:
    thread = threads.get(key.th_id)
    if thread is None:
        return None, "time"
    sharers = named[(key.seq_nr, key.th_id)]
    taker = thread.taker(key.seq_nr)
    if len(sharers) == 1 and taker is not None:
        return thread.ops[taker][0], "exact"
    stretch = thread.stretch(key.seq_nr)
    if len(stretch) == 1:  # the one op that submitted under this key: all its executions
        return stretch[0], "exact"
    if len(stretch) == len(sharers) and stretch:
        return stretch[sharers.index(ex.seq_id)], "order"
    return _before(ops, stretch, ex.start_ns, first=True), "time"


def _credit(
    report: JoinReport, ops: list[HostOp], targets: list[int | None], ex: Execution, rule: str
) -> None:
    found = [t for t in targets if t is not None]
    if not found:
        report.unmatched += 1
        report.unmatched_ns += ex.ns
        return
    report.executions[rule] += 1
    report.ns[rule] += ex.ns
    share = ex.ns / len(found)
    for i in found:
        report.op_ns[i] = report.op_ns.get(i, 0.0) + share
        op = ops[i]
        if op.place is None:
            report.unplaced_ns += share
            continue
        k = (op.place, op.phase)
        report.line_ns[k] = report.line_ns.get(k, 0.0) + share
        through = {op.place, *op.chain} if op.phase == "forward" else {op.place}
        for place in through:
            report.total_ns[(place, op.phase)] = report.total_ns.get((place, op.phase), 0.0) + share

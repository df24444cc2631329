"""Executed HLO instructions → source lines, through HLO metadata.

With ``XLA_IR_DEBUG=1 XLA_HLO_DEBUG=1`` torch-xla records the Python stack of
every IR node; each HLO instruction's ``OpMetadata.stack_frame_id`` points into
the module's stack-frame index (1-based ids, 0 = none; each frame names its
parent). Frame 0 is usually torch library code (``torch/nn/modules/linear.py``),
so the stack is walked outwards and only frames in user files count:

* the **innermost** user frame is the line that gets the instruction's time as
  *self* time;
* every user frame of the stack gets it as *total* time (a helper's line gets
  self, the lines that called it get total), each line once per instruction.

**Fusions** (the rule): what runs is the optimized module, where the compiler
fused instructions of several lines into one. A fusion's time goes to the line
of the metadata it carries (its root instruction's); if that has no user line,
to the line most of its fused instructions come from (ties: the one nearer the
root). Every user line among its fused instructions is listed as *covered* by
the fusion (``LineStat.instructions`` with ``credited`` false, and the region's
``covered_lines``), the way torch.compile regions are shown.

An instruction the compiler created without metadata (on CPU a ``reduce``
becomes a ``reduce-window`` plus a smaller ``reduce``, and only the latter keeps
the metadata) takes the line of the first instruction that reads its result
(inside a fusion: the fused instruction reading it), i.e. the op it was split from.

Time of one instruction in one step is the union of its intervals (the CPU
runtime splits big ops into partitions on worker threads). Instructions that no
user line reaches go to ``unattributed_us``; lines' self times plus that equal the sum
of every executed instruction's time.
"""

from __future__ import annotations

import bisect
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from trainium_lens.harness.intervals import union_length
from trainium_lens.harness.stacks import user_places
from trainium_lens.harness.xla.xplane import Capture, HloInstr, HloModule

# The CPU runtime runs a big instruction's partitions on Eigen worker threads too:
# those events add time (union) but not executions.
PARTITION_THREAD = "tf_XLAEigen"

Place = tuple[str, int, str]  # (workspace-relative file, line, function)


@dataclass
class Credit:
    """Where one optimized instruction's time goes."""

    stack: list[Place]  # user frames, innermost first; empty: unattributed
    covered: list[Place] = field(default_factory=list)  # every user line fused into it
    fused: int = 0  # instructions inside a fusion (0: not a fusion)


def user_stack(module: HloModule, frame_id: int, relpath: Callable[[str], str | None]) -> list[Place]:
    """User frames of a stack, innermost first, one entry per distinct line."""

    def frame(frame_id: int) -> tuple[Place | None, int] | None:
        if frame_id > len(module.stack_frames):
            return None
        location_id, parent = module.stack_frames[frame_id - 1]
        if not 0 < location_id <= len(module.file_locations):
            return None, parent
        file_id, function_id, line = module.file_locations[location_id - 1]
        rel = relpath(module.file_names[file_id - 1] if 0 < file_id <= len(module.file_names) else "")
        if rel is None:
            return None, parent
        names = module.function_names
        function = names[function_id - 1] if 0 < function_id <= len(names) else ""
        return (rel, line, function), parent

    return user_places(frame_id, frame)


def _fused_places(
    module: HloModule, ins: HloInstr, relpath: Callable[[str], str | None]
) -> tuple[list[list[Place]], int]:
    """User stacks of the instructions fused into ``ins``, in computation order."""
    stacks, count = [], 0
    for comp_id in ins.called:
        for inner in module.computations.get(comp_id, []):
            if inner.opcode == "parameter":
                continue
            count += 1
            stack = user_stack(module, inner.stack_frame_id, relpath)
            if stack:
                stacks.append(stack)
    return stacks, count


def _consumer_stack(module: HloModule, ins: HloInstr, relpath: Callable[[str], str | None]) -> list[Place]:
    """The user stack of the first instruction that reads ``ins``'s result (inside a
    fusion: the fused instruction that reads the matching parameter)."""
    for user in module.users(ins.id):
        if user.opcode == "fusion":
            index = user.operands.index(ins.id)
            for comp_id in user.called:
                body = module.computations.get(comp_id, [])
                params = {p.id for p in body if p.opcode == "parameter" and p.parameter_number == index}
                for inner in body:
                    if params & set(inner.operands):
                        stack = user_stack(module, inner.stack_frame_id, relpath)
                        if stack:
                            return stack
        stack = user_stack(module, user.stack_frame_id, relpath)
        if stack:
            return stack
    return []


def credit(module: HloModule, ins: HloInstr, relpath: Callable[[str], str | None]) -> Credit:
    stack = user_stack(module, ins.stack_frame_id, relpath)
    if ins.opcode != "fusion":
        if not stack and ins.opcode not in ("parameter", "constant", "tuple", "get-tuple-element"):
            stack = _consumer_stack(module, ins, relpath)
        return Credit(stack, stack[:1])
    inner, count = _fused_places(module, ins, relpath)
    covered = list(dict.fromkeys(s[0] for s in inner))
    if not stack and inner:
        votes: dict[Place, int] = {}
        last: dict[Place, int] = {}
        for i, s in enumerate(inner):
            votes[s[0]] = votes.get(s[0], 0) + 1
            last[s[0]] = i
        best = max(votes, key=lambda p: (votes[p], last[p]))
        stack = next(s for s in reversed(inner) if s[0] == best)
    if stack and stack[0] not in covered:
        covered.insert(0, stack[0])
    return Credit(stack, covered, count)


def _union_us(intervals: list[tuple[float, float]]) -> float:
    return union_length(intervals) / 1000.0  # ns → µs


@dataclass
class XlaAttribution:
    steps: int
    # per (module, instruction): its credit and, per step, time (µs) and executions
    credits: dict[tuple[str, str], Credit] = field(default_factory=dict)
    instrs: dict[tuple[str, str], HloInstr] = field(default_factory=dict)  # the compiled instruction
    time: dict[tuple[int, tuple[str, str]], float] = field(default_factory=dict)
    calls: dict[tuple[str, str], int] = field(default_factory=dict)
    windows: dict[Place, list[tuple[float, float]]] = field(default_factory=dict)  # ns, profiler clock
    unknown: set[str] = field(default_factory=set)  # executed names not in any module


def attribute(cap: Capture, step_starts: list[float], relpath: Callable[[str], str | None]) -> XlaAttribution:
    """Join executed instructions with the optimized HLO; ``step_starts``: the
    start (ns, profiler clock) of each measured step, in order."""
    att = XlaAttribution(steps=len(step_starts))
    by_name: dict[str, HloModule] = {m.name: m for m in cap.modules.values()}
    intervals: dict[tuple[int, tuple[str, str]], list[tuple[float, float]]] = {}
    runs: dict[tuple[int, tuple[str, str]], int] = {}
    for ev in cap.executed:
        step = bisect.bisect_right(step_starts, ev.start_ns) - 1
        if step < 0:
            continue
        module = cap.modules.get(ev.program_id) if ev.program_id is not None else None
        module = module or by_name.get(ev.hlo_module)
        if module is None:
            att.unknown.add(ev.hlo_op)
            continue
        key = (module.name, ev.hlo_op)
        ins = module.instruction(ev.hlo_op)
        if key not in att.credits:
            att.credits[key] = credit(module, ins, relpath) if ins else Credit([])
            if ins is not None:
                att.instrs[key] = ins
        intervals.setdefault((step, key), []).append((ev.start_ns, ev.end_ns))
        if not ev.thread.startswith(PARTITION_THREAD):
            runs[(step, key)] = runs.get((step, key), 0) + 1
        stack = att.credits[key].stack
        if stack:
            att.windows.setdefault(stack[0], []).append((ev.start_ns, ev.end_ns))
    for sk, spans in intervals.items():
        att.time[sk] = _union_us(spans)
        att.calls[sk[1]] = att.calls.get(sk[1], 0) + max(1, runs.get(sk, 0))
    return att


def _ref_order(ref: dict) -> tuple[bool, float]:
    """Credited instructions first, then by time."""
    return (not ref["credited"], -float(ref["self_time_us"]))


def figures(att: XlaAttribution, text: Callable[[str, int], str]) -> dict:
    """Lines, ops, regions and totals (per step), as ``build.lines_and_ops`` makes them."""
    n = max(att.steps, 1)
    per_key: dict[tuple[str, str], float] = {}
    for (_step, key), t in att.time.items():
        per_key[key] = per_key.get(key, 0.0) + t
    self_t: dict[Place, list[float]] = {}
    total_t: dict[Place, float] = {}
    calls_t: dict[Place, float] = {}
    refs: dict[Place, list[dict]] = {}
    line_ops: dict[Place, list[dict]] = {}
    unattributed = 0.0
    per_step = [0.0] * att.steps
    for (step, key), t in att.time.items():
        c = att.credits[key]
        if not c.stack:
            unattributed += t
            continue
        place = c.stack[0]
        self_t.setdefault(place, [0.0] * att.steps)[step] += t
        per_step[step] += t
        for outer in c.stack:
            total_t[outer] = total_t.get(outer, 0.0) + t
    for key, c in att.credits.items():
        module, name = key
        ins = att.instrs.get(key)
        t, calls = per_key.get(key, 0.0) / n, att.calls.get(key, 0) / n
        if not c.stack:
            continue
        place = c.stack[0]
        calls_t[place] = calls_t.get(place, 0.0) + calls
        ref = {
            "name": name,
            "module": module,
            "opcode": ins.opcode if ins else "",
            "op_type": ins.op_type if ins else "",
            "self_time_us": t,
            "calls": calls,
            "credited": True,
            "line": place[1],
        }
        refs.setdefault(place, []).append(ref)
        line_ops.setdefault(place, []).append(
            {"name": name, "calls": calls, "self_time_us": t, "self_cpu_us": t, "direct_calls": calls}
        )
        for other in c.covered:
            if other != place:
                refs.setdefault(other, []).append(dict(ref, credited=False))
    lines: list[dict[str, Any]] = []
    for place in set(refs) | set(self_t) | set(total_t):
        file, line, function = place
        steps = self_t.get(place, [0.0] * att.steps)
        med = statistics.median(steps) if steps else 0.0
        self_sum = sum(steps) / n
        lines.append(
            {
                "file": file,
                "line": line,
                "self_time_us": self_sum,
                "total_time_us": total_t.get(place, 0.0) / n,
                "self_cpu_us": self_sum,
                "calls": calls_t.get(place, 0.0),
                "self_time_us_min": min(steps) if steps else 0.0,
                "self_time_us_max": max(steps) if steps else 0.0,
                "self_time_us_median": med,
                "text": text(file, line),
                "function": function,
                "ops": sorted(line_ops.get(place, []), key=lambda o: -o["self_time_us"]),
                "instructions": sorted(refs.get(place, []), key=_ref_order),
                "step_us": [round(v, 3) for v in steps],  # schema 3 (no backward split on xla)
            }
        )
    lines.sort(key=lambda s: (-s["self_time_us"], -s["total_time_us"], s["file"], s["line"]))
    ops: list[dict[str, Any]] = []
    for key, t in per_key.items():
        calls = att.calls.get(key, 0) / n
        ops.append(
            {
                "name": key[1],
                "calls": calls,
                "self_time_us": t / n,
                "total_time_us": t / n,
                "self_cpu_us": t / n,
                "device_time_us": 0.0,
            }
        )
    ops.sort(key=lambda o: (-o["self_time_us"], o["name"]))
    regions: list[dict[str, Any]] = []
    for key, c in att.credits.items():
        ins = att.instrs.get(key)
        if ins is None or ins.opcode != "fusion" or not c.stack:
            continue
        file, line, _fn = c.stack[0]
        regions.append(
            {
                "name": key[1],
                "file": file,
                "line": line,
                "self_time_us": per_key.get(key, 0.0) / n,
                "calls": att.calls.get(key, 0) / n,
                "covered_lines": [{"file": f, "line": ln} for f, ln, _ in c.covered],
                "fx_nodes": c.fused,
            }
        )
    regions.sort(key=lambda r: -r["self_time_us"])
    return {
        "lines": lines,
        "ops": ops,
        "regions": regions,
        "unattributed_us": unattributed / n,
        "self_time_us": sum(o["self_time_us"] for o in ops),
        "dispatches": sum(calls_t.values()),
        "per_step": per_step,
    }

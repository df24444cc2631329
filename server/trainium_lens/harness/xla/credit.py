"""Which line, and which phase, an executed HLO instruction's time goes to.

The rules, in order (each names itself in ``Credit.via``):

1. ``source`` — the instruction's own metadata has user frames: its innermost
   user frame gets the time as *self*, every user frame of the stack as *total*
   (forward; an instruction with a source line is forward even if it carries a
   backward tag too: ``xla/tags.py`` explains how a tag can reach it).
2. ``tag`` — its ``op_name`` carries a backward tag (``xla/tags.py``): the
   backward of the forward line whose autograd node computed it.
3. ``fusion`` — the fusion's own metadata (its root instruction's) by 1 or 2;
   if it has none, the (line, phase) most of its fused instructions come from
   (ties: the one nearer the root). Every user line among them is *covered*.
4. ``call`` — a ``call``/``while``/``conditional`` (the CPU runtime wraps
   parallel work in calls): the instructions of the computations it calls. Its
   own time is what it spends outside them (``attribution.py`` takes the
   callees' time off), the cost of running that work.
5. ``consumer`` / ``producer`` — an instruction without metadata (the compiler
   made it: a layout ``copy``, the ``reduce-window`` split from a ``reduce``, a
   ``convert``): the first instruction that reads its result and has a line
   (inside a fusion: the fused instruction reading the parameter; through
   tuples, bitcasts and copies; out of a called computation to its caller);
   failing that, the first it reads from (a computation's parameter leads to the
   caller's operand). So an output copy takes the line that computed the value.
6. ``bucket`` — data movement that reaches no line that way (a graph input
   copied to an output, tuples of outputs): the named bucket
   ``PLUMBING``. What is left is unattributed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from trainium_lens.harness.stacks import user_places
from trainium_lens.harness.xla.hlo import HloInstr, HloModule
from trainium_lens.harness.xla.tags import tag_of

Place = tuple[str, int, str]  # (workspace-relative file, line, function)
FORWARD, BACKWARD = "forward", "backward"
PLUMBING = "graph plumbing"
# Instructions that only move or relabel data: when data flow finds no line for
# one, it is graph plumbing, not an unknown.
DATA_MOVEMENT = frozenset(
    {
        "copy",
        "copy-start",
        "copy-done",
        "bitcast",
        "tuple",
        "get-tuple-element",
        "parameter",
        "constant",
        "transpose",
        "reshape",
        "slice",
        "concatenate",
        "dynamic-slice",
        "dynamic-update-slice",
        "broadcast",
        "pad",
        "convert",
        "iota",
    }
)
INPUT_OPS = frozenset({"xla__device_data"})
# Passed through (not credited from) when data flow walks on.
_PASS = frozenset({"tuple", "get-tuple-element", "bitcast", "copy", "copy-start", "copy-done"})
_CALLS = frozenset({"call", "while", "conditional", "async-start", "async-done", "custom-call"})
_MAX_HOPS = 12


@dataclass
class Credit:
    """Where one optimized instruction's time goes."""

    stack: list[Place]  # user frames, innermost first; empty: a bucket or unattributed
    covered: list[Place] = field(default_factory=list)  # every user line fused into it
    fused: int = 0  # instructions inside a fusion (0: not a fusion)
    phase: str = FORWARD
    node: str = ""  # backward: the autograd node that computed it ("MmBackward0")
    via: str = ""  # the rule that decided (the module docstring's names)
    bucket: str = ""  # no line: the named bucket it belongs to ("" = unattributed)


Tags = Callable[[int], tuple[list[Place], str] | None]  # tag id -> (forward chain, node)
RelPath = Callable[[str], str | None]


def no_tags(_tag: int) -> None:
    return None


def user_stack(module: HloModule, frame_id: int, relpath: RelPath) -> list[Place]:
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


class Creditor:
    """The rules over one optimized module (answers are cached per instruction)."""

    def __init__(self, module: HloModule, relpath: RelPath, tags: Tags = no_tags):
        self.module, self.relpath, self.tags = module, relpath, tags
        self._own: dict[int, Credit | None] = {}

    # -- rules 1 and 2: what the instruction says itself --------------------------------
    def own(self, ins: HloInstr) -> Credit | None:
        if ins.id in self._own:
            return self._own[ins.id]
        found: Credit | None = None
        if ins.opcode == "parameter" or ins.op_type in INPUT_OPS:
            # a graph input's frames say where its data was made (the inputs function),
            # not what this graph computes
            self._own[ins.id] = None
            return None
        stack = user_stack(self.module, ins.stack_frame_id, self.relpath)
        if stack:
            found = Credit(stack, stack[:1], via="source")
        else:
            tag = tag_of(ins.op_name)
            known = self.tags(tag) if tag is not None else None
            if known is not None:
                chain, node = known
                found = Credit(list(chain), chain[:1], phase=BACKWARD, node=node, via="tag")
        self._own[ins.id] = found
        return found

    # -- the rules in order ------------------------------------------------------------------
    def credit(self, ins: HloInstr) -> Credit:
        if ins.opcode == "fusion":
            return self._fusion(ins)
        own = self.own(ins)
        if own is not None:
            return own
        if ins.opcode in _CALLS and ins.called:
            inner = self._inside(ins, set())
            if inner is not None:
                return Credit(inner.stack, inner.stack[:1], phase=inner.phase, node=inner.node, via="call")
        if ins.opcode not in ("parameter", "constant"):
            flow = self._consumer(ins) or self._producer(ins)
            if flow is not None:
                return flow
        if ins.opcode in DATA_MOVEMENT or self._moves_data(ins):
            return Credit([], via="bucket", bucket=PLUMBING)
        return Credit([])

    def _fusion(self, ins: HloInstr) -> Credit:
        inner: list[Credit] = []
        count = 0
        for comp_id in ins.called:
            for sub in self.module.computations.get(comp_id, []):
                if sub.opcode == "parameter":
                    continue
                count += 1
                c = self.own(sub)
                if c is not None:
                    inner.append(c)
        covered = list(dict.fromkeys(c.stack[0] for c in inner if c.phase == FORWARD))
        chosen = self.own(ins)
        via = "fusion"
        if chosen is None and inner:
            votes: dict[tuple[Place, str], int] = {}
            last: dict[tuple[Place, str], int] = {}
            for i, c in enumerate(inner):
                key = (c.stack[0], c.phase)
                votes[key] = votes.get(key, 0) + 1
                last[key] = i
            best = max(votes, key=lambda k: (votes[k], last[k]))
            chosen = next(c for c in reversed(inner) if (c.stack[0], c.phase) == best)
        if chosen is None:
            flow = self._consumer(ins) or self._producer(ins)
            if flow is not None:
                return Credit(flow.stack, flow.stack[:1], count, flow.phase, flow.node, flow.via)
            bucket = PLUMBING if self._moves_data(ins) else ""
            return Credit([], [], count, via="bucket" if bucket else "", bucket=bucket)
        if chosen.phase == FORWARD and chosen.stack[0] not in covered:
            covered.insert(0, chosen.stack[0])
        return Credit(chosen.stack, covered, count, chosen.phase, chosen.node, via)

    def _moves_data(self, ins: HloInstr) -> bool:
        """A fusion (or call) of data movement only (``copy_bitcast_fusion``)."""
        if not ins.called:
            return ins.opcode in DATA_MOVEMENT
        body = [s for c in ins.called for s in self.module.computations.get(c, [])]
        return bool(body) and all(s.opcode in DATA_MOVEMENT or self._moves_data(s) for s in body)

    def _inside(self, ins: HloInstr, seen: set[int], flow: bool = True) -> Credit | None:
        """The credit of the work a call-like instruction runs (its callees, in order).
        ``flow``: a fused callee may ask its neighbours (``credit``); not when a
        neighbour asks (``_with_line``): two lineless fusions would ask each other
        for ever (a graph traced without frames)."""
        seen.add(ins.id)
        for comp_id in ins.called:
            for sub in self.module.computations.get(comp_id, []):
                if sub.opcode == "parameter" or sub.id in seen:
                    continue
                if sub.opcode == "fusion":
                    c = self.credit(sub) if flow else self._fusion_own(sub)
                else:
                    c = self.own(sub)
                if c is None and sub.opcode in _CALLS and sub.called:
                    c = self._inside(sub, seen, flow)
                if c is not None and c.stack:
                    return c
        return None

    def _with_line(self, ins: HloInstr) -> Credit | None:
        """A line ``ins`` has without asking its neighbours."""
        if ins.opcode == "fusion":
            c = self._fusion_own(ins)
        else:
            c = self.own(ins)
            if c is None and ins.opcode in _CALLS and ins.called:
                c = self._inside(ins, set(), flow=False)
        return c if c is not None and c.stack else None

    def _fusion_own(self, ins: HloInstr) -> Credit | None:
        own = self.own(ins)
        if own is not None:
            return own
        for comp_id in ins.called:
            for sub in reversed(self.module.computations.get(comp_id, [])):
                c = self.own(sub)
                if c is not None:
                    return c
        return None

    def _consumer(self, ins: HloInstr) -> Credit | None:
        """The first reader (breadth first, through plumbing) that has a line."""
        module = self.module
        frontier, seen = [ins], {ins.id}
        for _hop in range(_MAX_HOPS):
            following: list[HloInstr] = []
            for cur in frontier:
                readers = list(module.users(cur.id))
                comp = module.computation_of(cur.id)
                if comp is not None and module.roots.get(comp) == cur.id:
                    readers += [u for caller in module.callers(comp) for u in module.users(caller.id)]
                for user in readers:
                    if user.id in seen:
                        continue
                    seen.add(user.id)
                    if user.opcode == "fusion":
                        c = self._fused_reader(user, cur)
                        if c is not None:
                            return self._flowed(c, "consumer")
                    c = self._with_line(user)
                    if c is not None:
                        return self._flowed(c, "consumer")
                    if user.opcode in _PASS or not user.stack_frame_id:
                        following.append(user)
            if not following:
                return None
            frontier = following
        return None

    def _fused_reader(self, fusion: HloInstr, operand: HloInstr) -> Credit | None:
        if operand.id not in fusion.operands:
            return None
        index = fusion.operands.index(operand.id)
        for comp_id in fusion.called:
            body = self.module.computations.get(comp_id, [])
            params = {p.id for p in body if p.opcode == "parameter" and p.parameter_number == index}
            for inner in body:
                if params & set(inner.operands):
                    c = self.own(inner)
                    if c is not None:
                        return c
        return None

    def _producer(self, ins: HloInstr) -> Credit | None:
        """The first operand (breadth first, through plumbing; a computation's
        parameter leads to its caller's operand) that has a line."""
        module = self.module
        frontier, seen = [ins], {ins.id}
        for _hop in range(_MAX_HOPS):
            following: list[HloInstr] = []
            for cur in frontier:
                sources = [module.by_id(o) for o in cur.operands]
                if cur.opcode == "parameter":
                    comp = module.computation_of(cur.id)
                    for caller in module.callers(comp) if comp is not None else []:
                        if caller.opcode != "fusion" and cur.parameter_number < len(caller.operands):
                            sources.append(module.by_id(caller.operands[cur.parameter_number]))
                for src in sources:
                    if src is None or src.id in seen:
                        continue
                    seen.add(src.id)
                    c = self._with_line(src)
                    if c is not None:
                        return self._flowed(c, "producer")
                    if src.opcode != "constant":
                        following.append(src)
            if not following:
                return None
            frontier = following
        return None

    @staticmethod
    def _flowed(c: Credit, via: str) -> Credit:
        return Credit(c.stack, c.stack[:1], phase=c.phase, node=c.node, via=via)


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
    graphs: set[str] = field(default_factory=set)  # modules that ran in the measured steps
    # lines that called an optimizer's step/zero_grad -> its range name (xla/tags.py)
    optimizer_places: dict[Place, str] = field(default_factory=dict)
    optimizer_calls: dict[str, int] = field(default_factory=dict)  # range name -> calls, all steps
    # an asynchronous instruction's untraced pool work (xla/async_work.py): (its op, (start, end) ns);
    # the trace shows it on a lane of its own, so the timeline holds the time the lines hold
    pool_work: list[tuple[str, tuple[float, float]]] = field(default_factory=list)

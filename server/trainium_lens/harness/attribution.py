"""One pass over the profiler's event tree: ATen op time → the user line that
dispatched it (self), and every user line on its label chain (total).

Definitions (docs/architecture.md, "Line attribution"):

* a *measured* event is an ATen-style op (``ns::name``) or a compiled region
  ("Torch-Compiled Region: i/j"); its self time is its time minus the time of
  the measured events nested in it, so every instant is counted once;
* the primary clock is CPU time (cpu backend) or the device time of the
  kernels an event launched (cuda/neuron; kernels of non-measured events go to
  the nearest measured ancestor);
* self time of a line: the self time of measured events whose innermost label
  is that line; total time: of every event with that line anywhere on its label
  chain (each event counted once per line, even when recursion repeats a line);
* events with no label: ``unattributed``. The sums reconcile by construction.

The pass visits each event once (explicit stack, no recursion, no per-event
walk up the tree): cost is linear in the number of events.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from itertools import zip_longest
from typing import Any, Iterable, Iterator

OTHER, OP, REGION, STEP, LABEL = 0, 1, 2, 3, 4
MAX_WINDOWS = 256  # per line: enough to place a line on the timeline, bounded memory
MERGE_GAP_US = 1.0
REGION_PREFIX = "Torch-Compiled Region"
_NOT_OPS = frozenset({"profiler", "torch", "autograd"})


def classify(name: str, labels: dict) -> int:
    if name in labels:
        return LABEL
    if name.startswith("ProfilerStep"):
        return STEP
    if name.startswith(REGION_PREFIX):
        return REGION
    i = name.find("::")
    if i > 0 and " " not in name[:i] and name[:i] not in _NOT_OPS:
        return OP
    return OTHER


class _Rec:
    """A measured event while its subtree is walked."""

    __slots__ = ("name", "key", "labels", "step", "owner", "kind")

    def __init__(self, name, key, labels, step, owner, kind):
        self.name = name
        self.key = key  # innermost label: where its self time goes (None: unattributed)
        self.labels = labels  # distinct labels on its chain: where its total goes
        self.step = step
        self.owner = owner  # nearest measured ancestor
        self.kind = kind


@dataclass
class Attribution:
    steps: int
    # (step, label) -> primary / cpu self time, primary total time
    line_self: dict = field(default_factory=lambda: defaultdict(float))
    line_cpu: dict = field(default_factory=lambda: defaultdict(float))
    line_total: dict = field(default_factory=lambda: defaultdict(float))
    line_calls: dict = field(default_factory=lambda: defaultdict(int))  # top-level dispatches
    # (label, op) -> [calls, primary self, cpu self, direct calls, first-seen order]
    line_ops: dict = field(default_factory=dict)
    # op -> [calls, primary self, primary total, cpu self, device self]
    ops: dict = field(default_factory=dict)
    # (region name, label) -> [calls, primary time (inclusive)]
    regions: dict = field(default_factory=dict)
    windows: dict = field(default_factory=dict)  # label -> [[start, end]] (merged, capped)
    device_unowned: float = 0.0
    events: int = 0
    paired_steps: int = 0  # labelled steps whose CPU times came from a plain step
    mismatched_steps: int = 0  # labelled steps whose plain partner ran other ops


def _measured(step: Any, kinds: dict, labels: dict) -> Iterator[Any]:
    """The measured events under a step, depth-first in start order (lazily)."""
    stack = [iter(step.cpu_children)]
    while stack:
        e = next(stack[-1], None)
        if e is None:
            stack.pop()
            continue
        kind = kinds.get(e.name)
        if kind is None:
            kind = kinds[e.name] = classify(e.name, labels)
        if kind == OP or kind == REGION:
            yield e
        if e.cpu_children:
            stack.append(iter(e.cpu_children))


def same_ops(a: Any, b: Any, kinds: dict, labels: dict) -> bool:
    """Did two steps run the same op sequence? (names, in order; O(1) memory)"""
    for x, y in zip_longest(_measured(a, kinds, labels), _measured(b, kinds, labels)):
        if x is None or y is None or x.name != y.name:
            return False
    return True


def attribute(events: Iterable[Any], labels: dict, device_clock: bool,
              region_fallback: str | None = None, cpu_device_type: Any = None,
              paired: bool = False) -> Attribution:
    """Attribute the events of one profile (``prof.events()``).

    ``labels``: label names the harness opened; ``region_fallback``: the label a
    compiled region without a user caller goes to (the profiled function's def).
    ``paired``: the steps alternate labelled, plain, labelled, ...: lines come
    from the labelled steps, CPU times from the plain step after each (same op
    sequence, walked in lockstep): labels cost time *around* ops and perturb the
    ops' own CPU time too, so CPU figures come from the unlabelled steps.
    """
    kinds: dict[str, int] = {}
    cpu = cpu_device_type

    def roots():
        for e in events:
            if e.cpu_parent is None and (cpu is None or e.device_type == cpu):
                yield e

    steps = sorted((e for e in roots() if e.name.startswith("ProfilerStep")),
                   key=lambda e: e.time_range.start)
    skip: set[int] = set()
    partner: dict[int, Any] = {}  # id(labelled step) -> its plain twin (same ops)
    mismatched = 0
    if paired:
        plain = steps[1::2]
        steps = steps[0::2]
        skip = {id(e) for e in plain}
        for a, b in zip(steps, plain):
            if same_ops(a, b, kinds, labels):
                partner[id(a)] = b
            else:
                mismatched += 1
    step_of = {id(e): i for i, e in enumerate(steps)}
    out = Attribution(steps=len(steps))
    out.paired_steps = len(steps) - mismatched if paired else 0
    out.mismatched_steps = mismatched
    line_self, line_cpu, line_total = out.line_self, out.line_cpu, out.line_total
    line_calls, line_ops, ops, regions = out.line_calls, out.line_ops, out.ops, out.regions
    windows = out.windows
    count = 0

    # depth-first, one frame per tree level (memory grows with depth, not width)
    stack = [(roots(), -1, (), None)]
    push, pop = stack.append, stack.pop
    twin = None  # the plain twin's measured events, consumed in lockstep
    while stack:
        it, step, chain, owner = stack[-1]
        e = next(it, None)
        if e is None:
            pop()
            continue
        count += 1
        if len(stack) == 1:  # a root: a new step (or an event outside the steps)
            b = partner.get(id(e))
            twin = _measured(b, kinds, labels) if b is not None else None
        name = e.name
        kind = kinds.get(name)
        if kind is None:
            kind = kinds[name] = classify(name, labels)
        rec = owner
        if kind == STEP:
            if id(e) in skip:
                continue
            step = step_of.get(id(e), step)
        elif kind == LABEL:
            chain = chain + (name,)
            tr = e.time_range
            w = windows.get(name)
            if w is None:
                windows[name] = [[tr.start, tr.end]]
            else:
                last = w[-1]
                if last[0] <= tr.start <= last[1] + MERGE_GAP_US:
                    if tr.end > last[1]:
                        last[1] = tr.end
                elif len(w) < MAX_WINDOWS:
                    w.append([tr.start, tr.end])
        elif kind == OP or kind == REGION:
            tr = next(twin).time_range if twin is not None else e.time_range
            elapsed = tr.end - tr.start
            key = chain[-1] if chain else (region_fallback if kind == REGION else None)
            if owner is not None and owner.key == key and owner.step == step:
                tot = owner.labels
            elif key is None or key in chain:
                tot = tuple(dict.fromkeys(chain))
            else:
                tot = tuple(dict.fromkeys(chain + (key,)))
            rec = _Rec(name, key, tot, step, owner, kind)
            stat = ops.get(name)
            if stat is None:
                stat = ops[name] = [0, 0.0, 0.0, 0.0, 0.0]
            stat[0] += 1
            stat[3] += elapsed
            lo = line_ops.get((key, name))
            if lo is None:
                lo = line_ops[(key, name)] = [0, 0.0, 0.0, 0, len(line_ops)]
            lo[0] += 1
            lo[2] += elapsed
            line_cpu[(step, key)] += elapsed
            if not device_clock:
                stat[1] += elapsed
                stat[2] += elapsed
                lo[1] += elapsed
                line_self[(step, key)] += elapsed
            if kind == REGION:
                reg = regions.get((name, key))
                if reg is None:
                    reg = regions[(name, key)] = [0, 0.0]
                reg[0] += 1
                if not device_clock:
                    reg[1] += elapsed
            if owner is None:
                lo[3] += 1  # dispatched by the line itself, not inside another op
                if key is not None:
                    line_calls[key] += 1
                if not device_clock:
                    for lab in tot:
                        line_total[(step, lab)] += elapsed
            else:
                # the owner's self excludes this event (nested measured time)
                ostat = ops[owner.name]
                ostat[3] -= elapsed
                olo = line_ops[(owner.key, owner.name)]
                olo[2] -= elapsed
                line_cpu[(owner.step, owner.key)] -= elapsed
                if not device_clock:
                    ostat[1] -= elapsed
                    olo[1] -= elapsed
                    line_self[(owner.step, owner.key)] -= elapsed
                    if tot is not owner.labels:
                        for lab in tot:
                            line_total[(step, lab)] += elapsed
                        for lab in owner.labels:
                            line_total[(owner.step, lab)] -= elapsed
        if device_clock:
            kernels = e.kernels
            if kernels:
                d = 0.0
                for k in kernels:
                    d += k.duration
                if rec is None:
                    out.device_unowned += d
                else:
                    _add_device(out, rec, d)
        children = e.cpu_children
        if children:
            push((iter(children), step, chain, rec))
    out.events = count
    return out


def _add_device(out: Attribution, rec: _Rec, d: float) -> None:
    """Device time of kernels launched under ``rec`` (its self) and its ancestors (total)."""
    stat = out.ops[rec.name]
    stat[1] += d
    stat[4] += d
    out.line_ops[(rec.key, rec.name)][1] += d
    out.line_self[(rec.step, rec.key)] += d
    for lab in rec.labels:
        out.line_total[(rec.step, lab)] += d
    node: _Rec | None = rec
    while node is not None:
        out.ops[node.name][2] += d
        if node.kind == REGION:
            out.regions[(node.name, node.key)][1] += d
        node = node.owner

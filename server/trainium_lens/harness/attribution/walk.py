"""The attribution pass proper: one visit per event of the profiler's tree, with
an explicit stack (``tree.py`` says what it computes and picks the forests)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from trainium_lens.harness.attribution.kinds import (
    BACKWARD,
    BACKWARD_PREFIX,
    BWD,
    CLOSURE,
    FWD,
    LABEL,
    MAX_WINDOWS,
    MERGE_GAP_US,
    OP,
    OPTIM,
    OPTIMIZER,
    OTHER,
    RECOMPUTE,
    REGION,
    REGION_PREFIX,
    STEP,
    classify,
)
from trainium_lens.harness.attribution.steps import LabelIndex
from trainium_lens.harness.attribution.tallies import Attribution, LineOpFigures, OpFigures, OptimizerFigures


class _Rec:
    """A measured event while its subtree is walked."""

    __slots__ = (
        "name",
        "key",
        "labels",
        "step",
        "owner",
        "kind",
        "phase",
        "tphase",
        "stat",
        "lo",
        "opt",
        "depth",
        "region",
        "cal",
    )

    def __init__(self, name, key, labels, step, owner, kind, phase, tphase, stat, lo, opt, depth, region):
        self.name = name
        self.key = key  # innermost label: where its self time goes (None: unattributed)
        self.labels = labels  # distinct labels on its chain: where its total goes
        self.step = step
        self.owner = owner  # nearest measured ancestor
        self.kind = kind
        self.phase = phase  # FWD / BWD / RECOMPUTE: which of the line's figures
        self.tphase = tphase  # the same, OPTIMIZER for optimizer ops: the totals' split
        self.stat = stat  # its OpFigures
        self.lo = lo  # its LineOpFigures
        self.opt = opt  # its OptimizerFigures or None
        self.depth = depth  # measured ancestors (0: dispatched by the line or node itself)
        self.region = region  # its regions entry (compiled regions only)
        self.cal = 0.0  # its calibrated self time so far (cpu clock): settled at >= 0


class _Ctx:
    """What the walk knows above an event: backward node, optimizer range, label index."""

    __slots__ = ("bw_key", "bw_labels", "bw_depth", "node", "opt", "lpos", "fw_region")

    def __init__(self, bw_key=None, bw_labels=None, bw_depth=-1, node="", opt=None, lpos=-1, fw_region=None):
        self.bw_key = bw_key  # the forward line the backward node belongs to
        self.bw_labels = bw_labels  # and that forward op's chain (total)
        self.bw_depth = bw_depth  # chain length at the backward range (-1: not in one)
        self.node = node  # the backward node's name ("AddmmBackward0")
        self.opt = opt
        self.lpos = lpos  # innermost open label in the step's LabelIndex
        self.fw_region = fw_region  # the compiled region whose forward made the node


_TOP = _Ctx()


class Walk:
    """The attribution pass proper (``attribute`` picks the forests it walks)."""

    def __init__(
        self,
        out: Attribution,
        kinds: dict,
        labels: dict,
        device_clock: bool,
        region_fallback: str | None,
        record_events: bool,
        main_thread: Any,
    ):
        self.out, self.kinds, self.labels = out, kinds, labels
        self.device_clock = device_clock
        self.region_fallback = region_fallback
        self.record = record_events
        self.main_thread = main_thread
        # (sequence_nr, thread) -> (label, chain, compiled region) of the forward op
        # (or autograd Function range, e.g. AOTAutograd's CompiledFunction) that made the node
        self.forward: dict[tuple[int, Any], tuple[str | None, tuple, str | None]] = {}
        self.per_depth = 0.0
        self.per_top: float | None = None
        self.gap_factor = 1.0

    def run(self, roots: list, step: int, twin: Iterator[Any] | None) -> None:
        out, kinds, labels = self.out, self.kinds, self.labels
        device_clock, record = self.device_clock, self.record
        line_cpu, line_total = out.line_cpu, out.line_total
        line_calls, line_ops, ops, regions = out.line_calls, out.line_ops, out.ops, out.regions
        windows, event_lines = out.windows, out.event_lines
        forward = self.forward
        per_depth = self.per_depth
        # host time between ops: gaps between the plain twin's top-level ops on the
        # main thread (Python, the autograd engine), each to the line of the op after it
        host_on = self.per_top is not None and twin is not None
        per_top, gap_factor = self.per_top or 0.0, self.gap_factor
        main_thread, line_host = self.main_thread, out.line_host
        prev_end: float | None = None
        ranges = 0  # non-op ranges recorded since the last top-level op
        index = LabelIndex()
        count = 0
        # depth-first, one frame per tree level (memory grows with depth, not width)
        stack: list[tuple] = [(iter(roots), (), None, _TOP, False)]
        push, pop = stack.append, stack.pop
        while stack:
            it, chain, owner, ctx, done = stack[-1]
            e = next(it, None)
            if e is None:
                pop()
                if done and owner.cal < 0.0:  # the measured event ``owner``'s subtree is walked
                    _settle(out, owner)
                continue
            count += 1
            name = e.name
            kind = kinds.get(name)
            if kind is None:
                kind = kinds[name] = classify(name, labels)
            rec = owner
            if host_on and kind != LABEL and kind != OP and kind != REGION and kind != STEP:
                # a recorded range that is no op (an autograd node, an optimizer step,
                # a cache lookup): its callbacks fall in the gap too
                if getattr(e, "thread", None) == main_thread:
                    ranges += 1
            if kind == LABEL:
                tr = e.time_range
                if len(stack) == 1 or getattr(e, "thread", None) == self.main_thread:
                    ctx = _copy(ctx, lpos=index.add(tr.start, tr.end, name, chain + (name,), ctx.lpos))
                chain = chain + (name,)
                _window(windows, name, tr)
            elif kind == BACKWARD:
                ctx = self._backward(e, chain, ctx, index)
            elif kind == OTHER and e.sequence_nr >= 0 and ctx.bw_depth < 0:
                # an autograd Function's forward range (CompiledFunction, a custom
                # Function): its backward node links here, to the line that called it
                if owner is not None:
                    forward[(e.sequence_nr, e.thread)] = (owner.key, owner.labels, _region_of(owner))
                elif chain:
                    forward[(e.sequence_nr, e.thread)] = (chain[-1], tuple(dict.fromkeys(chain)), None)
            elif kind == OPTIM:
                opt = out.optimizers.get(name)
                if opt is None:
                    opt = out.optimizers[name] = OptimizerFigures(chain[-1] if chain else None)
                opt.calls += 1
                ctx = _copy(ctx, opt=opt)
            elif kind == CLOSURE:
                ctx = _copy(ctx, opt=None)  # the closure's forward and backward: no optimizer time
            elif kind == OP or kind == REGION:
                te = next(twin) if twin is not None else e  # the plain twin's event: its time
                tr = te.time_range
                elapsed = tr.end - tr.start
                top = host_on and owner is None and getattr(te, "thread", None) == main_thread
                if ctx.bw_depth < 0 or len(chain) > ctx.bw_depth:
                    key = chain[-1] if chain else (self.region_fallback if kind == REGION else None)
                    phase = FWD if ctx.bw_depth < 0 else (RECOMPUTE if e.sequence_nr >= 0 else BWD)
                    node = "" if phase != BWD else ctx.node
                    if owner is not None and owner.key == key and owner.step == step:
                        tot = owner.labels
                    elif key is None or key in chain:
                        tot = tuple(dict.fromkeys(chain))
                    else:
                        tot = tuple(dict.fromkeys(chain + (key,)))
                    if phase != BWD and e.sequence_nr >= 0:
                        forward[(e.sequence_nr, e.thread)] = (key, tot, None)
                else:
                    key, tot, node = ctx.bw_key, ctx.bw_labels, ctx.node
                    # grad mode on inside the engine: forward re-run (checkpointing); the
                    # compiled backward's own range carries its node's number: backward
                    phase = BWD if e.sequence_nr < 0 or kind == REGION else RECOMPUTE
                opt = ctx.opt
                tphase = OPTIMIZER if opt is not None else phase
                stat = ops.get(name)
                if stat is None:
                    stat = ops[name] = OpFigures()
                lk = (key, name, phase, node)
                lo = line_ops.get(lk)
                if lo is None:
                    lo = line_ops[lk] = LineOpFigures(len(line_ops))
                depth = 0 if owner is None else owner.depth + 1
                # the profiler's own cost in this event's window (calibrate.py); a
                # self time it takes below 0 is settled when the subtree is done
                corr = per_depth * depth
                cal = elapsed - corr
                whole = cal if cal > 0.0 else 0.0  # its total: never below 0
                reg = None
                if kind == REGION:
                    rname = name if ctx.fw_region is None or phase != BWD else f"{name} ({ctx.fw_region})"
                    reg = regions.get((rname, key))
                    if reg is None:
                        reg = regions[(rname, key)] = [0, 0.0, phase]
                    reg[0] += 1
                rec = _Rec(name, key, tot, step, owner, kind, phase, tphase, stat, lo, opt, depth, reg)
                if record:
                    event_lines[e.id] = event_lines[te.id] = (key, phase)
                stat.calls += 1
                stat.cpu += elapsed
                lo.calls += 1
                lo.cpu += elapsed
                sk = (step, key, phase)
                line_cpu[sk] += elapsed
                if opt is not None:
                    if opt.key is None:
                        opt.key = key  # the range opens before the line's labels do
                    opt.ops += 1
                    if "_foreach_" in name or "_fused_" in name:
                        opt.fused_ops += 1
                if not device_clock:
                    rec.cal = cal
                    _shift(out, rec, cal)
                    stat.total_time += whole
                    if reg is not None:
                        reg[1] += whole
                    if corr:
                        out.calibrated_us += corr
                if top and phase == BWD:
                    prev_end, ranges = tr.end, 0  # the engine's C++ between nodes: not host time
                elif top:
                    cost = per_top * (1 + ranges)
                    if prev_end is not None and tr.start - prev_end > cost:
                        line_host[(step, key, phase)] += (tr.start - prev_end - cost) / gap_factor
                    prev_end, ranges = tr.end, 0
                if owner is None:
                    lo.direct += 1  # dispatched by the line (or node) itself, not inside an op
                    if key is not None and phase == FWD:
                        line_calls[key] += 1
                    if not device_clock:
                        for lab in tot:
                            line_total[(step, lab, phase)] += elapsed
                else:
                    # the owner's self excludes this event (nested measured time)
                    owner.stat.cpu -= elapsed
                    owner.lo.cpu -= elapsed
                    ok = (owner.step, owner.key, owner.phase)
                    line_cpu[ok] -= elapsed
                    if not device_clock:
                        owner.cal -= elapsed
                        _shift(out, owner, -elapsed)
                        if tot is not owner.labels or phase != owner.phase:
                            for lab in tot:
                                line_total[(step, lab, phase)] += elapsed
                            for lab in owner.labels:
                                line_total[(owner.step, lab, owner.phase)] -= elapsed
                        if corr:
                            for lab in tot:
                                line_total[(step, lab, phase)] -= corr
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
            settle = per_depth > 0.0 and rec is not owner  # a measured event: settle its subtree
            if children:
                push((iter(children), chain, rec, ctx, settle))
            elif settle and rec.cal < 0.0:
                _settle(out, rec)
        out.events += count

    def _backward(self, e: Any, chain: tuple, ctx: _Ctx, index: LabelIndex) -> _Ctx:
        """The context under a backward range: the forward line its node belongs to."""
        out = self.out
        out.backward_nodes += 1
        node = e.name[len(BACKWARD_PREFIX) :]
        found = self.forward.get((e.sequence_nr, e.fwd_thread))
        region = None
        if found is not None:
            key, labels, region = found
        else:
            # no forward partner: the line that called backward() (on its own thread,
            # or the main thread's label open at that instant)
            out.unlinked_nodes += 1
            if chain:
                key, labels = chain[-1], tuple(dict.fromkeys(chain))
            else:
                at = index.at(e.time_range.start)
                key, labels = (at[0], tuple(dict.fromkeys(at[1]))) if at else (None, ())
        return _copy(ctx, bw_key=key, bw_labels=labels, bw_depth=len(chain), node=node, fw_region=region)


def _copy(ctx: _Ctx, **changes: Any) -> _Ctx:
    new = _Ctx(ctx.bw_key, ctx.bw_labels, ctx.bw_depth, ctx.node, ctx.opt, ctx.lpos, ctx.fw_region)
    for k, v in changes.items():
        setattr(new, k, v)
    return new


def _window(windows: dict, name: str, tr: Any) -> None:
    w = windows.get(name)
    if w is None:
        windows[name] = [[tr.start, tr.end]]
        return
    last = w[-1]
    if last[0] <= tr.start <= last[1] + MERGE_GAP_US:
        if tr.end > last[1]:
            last[1] = tr.end
    elif len(w) < MAX_WINDOWS:
        w.append([tr.start, tr.end])


def _shift(out: Attribution, rec: _Rec, v: float) -> None:
    """Add ``v`` to the self figures of ``rec`` (its op, line, phase, optimizer)."""
    rec.stat.self_time += v
    rec.lo.self_time += v
    out.line_self[(rec.step, rec.key, rec.phase)] += v
    out.phase_time[(rec.step, rec.tphase)] += v
    if rec.opt is not None:
        rec.opt.self_time += v


def _settle(out: Attribution, rec: _Rec) -> None:
    """After ``rec``'s subtree: a calibrated self time below 0 back to 0, the
    deficit taken from its owner (whose subtree is still open), or, at the top,
    given back: the calibration took more than the whole op measured."""
    deficit = -rec.cal
    if deficit <= 0.0:
        return
    rec.cal = 0.0
    _shift(out, rec, deficit)
    owner = rec.owner
    moved = owner is None or rec.labels is not owner.labels or rec.phase != owner.phase
    if moved:
        for lab in rec.labels:
            out.line_total[(rec.step, lab, rec.phase)] += deficit
    if owner is None:
        out.calibrated_us -= deficit
        return
    owner.cal -= deficit
    _shift(out, owner, -deficit)
    if moved:
        for lab in owner.labels:
            out.line_total[(owner.step, lab, owner.phase)] -= deficit


def _add_device(out: Attribution, rec: _Rec, d: float) -> None:
    """Device time of kernels launched under ``rec`` (its self) and its ancestors (total)."""
    _shift(out, rec, d)
    rec.stat.device += d
    for lab in rec.labels:
        out.line_total[(rec.step, lab, rec.phase)] += d
    node: _Rec | None = rec
    while node is not None:
        node.stat.total_time += d
        if node.region is not None:
            node.region[1] += d
        node = node.owner


def _region_of(rec: _Rec) -> str | None:
    """The compiled region ``rec`` is in (itself included), by its name."""
    node: _Rec | None = rec
    while node is not None:
        if node.kind == REGION and node.name.startswith(REGION_PREFIX):
            return node.name
        node = node.owner
    return None

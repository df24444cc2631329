"""One pass over the profiler's event tree: ATen op time → the user line that
dispatched it (self), and every user line on its label chain (total) — for the
forward *and* for the backward it causes.

Definitions (docs/harness.md, "Line attribution" and "Backward"):

* a *measured* event is an ATen-style op (``ns::name``) or a compiled region
  ("Torch-Compiled Region: i/j"); its self time is its time minus the time of
  the measured events nested in it, so every instant is counted once;
* the primary clock is CPU time (cpu backend) or the device time of the
  kernels an event launched (cuda/neuron; kernels of non-measured events go to
  the nearest measured ancestor);
* forward: self time of a line is the self time of measured events whose
  innermost label is that line; total time: of every event with that line
  anywhere on its label chain (each event counted once per line);
* backward: ops under an ``autograd::engine::evaluate_function: XBackward0``
  range take the lines of the forward op that created the node — the forward
  op with the same ``sequence_nr`` on the thread the range names as
  ``fwd_thread`` — whichever thread ran them: that op's innermost label (self)
  and its chain (total). A node with no forward partner (``AccumulateGrad``,
  hooks) stays on the line that called ``backward()``; ops that user Python
  dispatched inside a backward range (labels opened inside it) are
  *recompute* (``torch.utils.checkpoint``) when grad mode recorded them (a
  ``sequence_nr``), else backward on their own line (a custom
  ``Function.backward``); unlabelled ops with a ``sequence_nr`` there are
  recompute too, on the node's line (where torch gave no hook to label them);
* ops under ``Optimizer.step#…``/``Optimizer.zero_grad#…`` are forward ops of
  their line, and also counted as optimizer time, except those of the closure the
  step called (``kinds.CLOSURE_RANGE``: Lightning's forward and backward), which
  are the model's own;
* events with no line: ``unattributed``. The sums reconcile by construction.

Calibration (cpu clock): an event at nesting depth d loses ``per_depth × d``,
the profiler's cost inside its window. When its subtree is done, a self time
the cost took below 0 (a tiny op, or a calibration read on a busy host) is
settled: the deficit is taken from its owner instead, and what reaches the
top-level op with nothing left to take is given back (not subtracted at all).
So no op, line or phase is calibrated below 0, and the sums still reconcile.

The pass visits each event once (explicit stack, no recursion, no per-event
walk up the tree): cost is linear in the number of events.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import zip_longest
from typing import Any

from trainium_lens.harness.attribution.kinds import (
    OP,
    REGION,
    classify,
)
from trainium_lens.harness.attribution.steps import Forests
from trainium_lens.harness.attribution.tallies import Attribution, LineOpFigures, OpFigures, OptimizerFigures
from trainium_lens.harness.attribution.walk import Walk

__all__ = [
    "Attribution",
    "LineOpFigures",
    "OpFigures",
    "OptimizerFigures",
    "attribute",
    "classify",
    "same_ops",
]


def _measured(roots: list, kinds: dict, labels: dict) -> Iterator[Any]:
    """The measured events under some roots, depth-first in start order (lazily)."""
    stack = [iter(roots)]
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


def same_ops(a: list, b: list, kinds: dict, labels: dict) -> bool:
    """Did two forests run the same op sequence? (names, in order; O(1) memory)"""
    for x, y in zip_longest(_measured(a, kinds, labels), _measured(b, kinds, labels)):
        if x is None or y is None or x.name != y.name:
            return False
    return True


def attribute(
    events: Iterable[Any],
    labels: dict,
    device_clock: bool,
    region_fallback: str | None = None,
    cpu_device_type: Any = None,
    paired: bool = False,
    record_events: bool = False,
    keep: list[bool] | None = None,
    per_depth_us: float = 0.0,
    calls_per_step: int = 1,
    per_top_us: float | None = None,
    gap_factor: float = 1.0,
) -> Attribution:
    """Attribute the events of one profile (``prof.events()``).

    ``labels``: label names the harness opened; ``region_fallback``: the label a
    compiled region without a user caller goes to (the profiled function's def).
    ``paired``: the steps alternate labelled, plain, labelled, ...: lines come
    from the labelled steps, CPU times from the plain step after each (same op
    sequence, walked in lockstep): labels cost time *around* ops and perturb the
    ops' own CPU time too, so CPU figures come from the unlabelled steps.
    ``record_events``: fill ``event_lines`` (the exported trace's lines).
    ``keep``: per measured step (paired: per pair) whether to use it (steps the
    host disturbed are left out, ``eager/steady.py``); ignored unless it has one
    entry per step. ``per_depth_us``: the calibrated profiler cost of an op event
    per level of nesting (cpu clock, ``eager/calibrate.py``), subtracted from the
    primary figures (``cpu`` figures stay raw). ``calls_per_step``: calls of the
    function in each step (figures are per call). ``per_top_us`` (cpu clock,
    paired): read the host time between ops from the plain twins — the gap before
    each top-level op on the main thread, less the profiler's own cost there and
    divided by ``gap_factor`` (Python's slowdown under the profiler), goes to that
    op's line and phase (``line_host``); None: not read. Gaps before backward ops
    are not read: between autograd nodes the engine's own work cannot be told
    from the profiler's (two ranges per node), and read as host time it came out
    several times what the unprofiled wall leaves.
    """
    kinds: dict[str, int] = {}
    forests = Forests(events, cpu_device_type)
    indices = list(range(len(forests.steps)))
    partner: dict[int, list] = {}  # labelled step index -> its plain twin's forest
    mismatched = 0
    if paired:
        indices = indices[0::2]
    measured = indices
    if keep is not None and len(keep) == len(indices):
        indices = [i for i, use in zip(indices, keep, strict=True) if use]
    if paired:
        for i in measured:
            if i + 1 < len(forests.steps):
                a, b = forests.forest(i), forests.forest(i + 1)
                if same_ops(a, b, kinds, labels):
                    partner[i] = b
                    continue
            if i in indices:
                mismatched += 1
    out = Attribution(steps=len(indices), calls_per_step=max(1, calls_per_step))
    out.paired_steps = len(indices) - mismatched if paired else 0
    out.mismatched_steps = mismatched
    out.recorded_steps = len(forests.steps) // (2 if paired else 1)
    walk = Walk(out, kinds, labels, device_clock, region_fallback, record_events, forests.main_thread)
    walk.per_depth = 0.0 if device_clock else max(0.0, per_depth_us)
    walk.per_top = None if device_clock or not paired or per_top_us is None else max(0.0, per_top_us)
    out.host_read = walk.per_top is not None
    walk.gap_factor = max(1.0, gap_factor)
    threads: set[Any] = set()
    for step, i in enumerate(indices):
        forest = forests.forest(i)
        threads.update(getattr(e, "thread", None) for e in forest)
        twin = partner.get(i)
        walk.run(forest, step, _measured(twin, kinds, labels) if twin is not None else None)
    walk.run(forests.outside, -1, None)
    out.threads = max(1, len(threads))
    left_out = [i for i in measured if i not in set(indices)]
    if record_events and left_out:
        # steps the host disturbed: not in the figures, but their ops still carry
        # their lines in the exported trace (and their lines' windows stay)
        scratch = Attribution(steps=len(left_out))
        scratch.event_lines, scratch.windows = out.event_lines, out.windows
        aside = Walk(scratch, kinds, labels, device_clock, region_fallback, True, forests.main_thread)
        for step, i in enumerate(left_out):
            twin = partner.get(i)
            aside.run(forests.forest(i), step, _measured(twin, kinds, labels) if twin is not None else None)
    return out

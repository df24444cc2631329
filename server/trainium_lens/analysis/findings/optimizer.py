"""Optimizer findings: the fastest ``step`` implementation, as measured.

``torch.optim`` optimizers have three implementations of ``step``: a Python loop
over the parameters (``foreach=False``, the default for CPU tensors), one
``_foreach_*`` op per update term over all parameters (``foreach=True``), and
one fused kernel (``fused=True``). Which is fastest depends on the device and
the parameters: on a CPU ``foreach=True`` can be *slower* than the loop while
``fused=True`` is three times faster. So the advice comes from measurement:
the harness times the three on copies of the run's parameters, gradients and
state, on the run's device (``harness/eager/optim_trials.py``,
``OptimizerStat.trials``), and the finding names the fastest with its time —
or stays silent when what the code runs is already the fastest (within
``MIN_GAIN``). The figure compared is each implementation's **best** step
(``OptimizerTrial.time_us_min``, the median beside it in the JSON): on a busy
host the median of a few steps is mostly other processes' time (nanoGPT's
AdamW, 2 cores at load 12: loop median 59–94 ms against a best of 2.7–3.3 ms),
while the best step is what the implementation costs when it runs.

* ``optimizer_loop`` (warning): the step ran per-parameter loops
  (``LOOP_MIN_OPS`` ops or more, not one ``_foreach_``/``_fused_`` op) and a
  measured implementation is faster.
* ``optimizer_choice`` (info): it already runs ``foreach`` or ``fused`` and
  another measured implementation is ``MIN_GAIN`` faster.
* A loop without measurements (a result from before they were taken, a
  backend that does not take them), or whose measurement a busy host disturbed
  (a median step over ``NOISY_TRIAL`` × its best) without a decisive winner (one
  whose median step beats the current implementation's best), keeps the
  unmeasured hint, and says which.
"""

from __future__ import annotations

from trainium_lens.harness.pairs import FASTER, UNDECIDED, Verdict
from trainium_lens.model import figures
from trainium_lens.model.result import Finding, OptimizerStat, OptimizerTrial, Result

LOOP_MIN_OPS = 24  # fewer ops per step: too few parameters for the loop to matter
MIN_GAIN = 1.1  # the fastest must beat the current implementation by this factor
# A trial whose median step is this far above its best was mostly other processes'
# time (nanoGPT's AdamW at load 10 on 2 cores: medians 34-78 ms, best 2.9-13.6 ms
# against ~0.9 ms for fused alone, five steps each): its best is no figure to choose
# by either. Below it (examples/train_step.py at load 5: medians 1.2-1.6x the best
# over 27-50 steps) the best steps rank as the independent timing does
# (bench/README.md, "Advice checked").
NOISY_TRIAL = 3.0
KIND = "optimizer_loop"
KIND_CHOICE = "optimizer_choice"


def optimizer_findings(result: Result) -> list[Finding]:
    if result.backend == "xla":
        # a compiled graph: the loop is traced once into the graph and fused by the
        # compiler; how many ops Python issued costs nothing per step
        return []
    found = []
    for opt in result.optimizers:
        if not opt.name.startswith("Optimizer.step#"):
            continue
        finding = _measured(opt) if any(_best(t) for t in opt.trials) else _unmeasured(opt)
        if finding is not None:
            found.append(finding)
    return found


def _class(opt: OptimizerStat) -> str:
    return opt.name.split("#", 1)[1].rsplit(".", 1)[0]


def _loop(opt: OptimizerStat) -> bool:
    return not opt.fused_ops and opt.ops >= LOOP_MIN_OPS


def _best(t: OptimizerTrial) -> float | None:
    """A trial's figure: its best step (older results: the median)."""
    return t.time_us_min or t.time_us


def _trial_text(t: OptimizerTrial) -> str:
    best = _best(t)
    if best:
        return f"{t.config} {figures.time_us(best)}" + (" (now)" if t.current else "")
    return f"{t.config} not run ({t.error or 'no figure'})"


def _measured(opt: OptimizerStat) -> Finding | None:
    if any(t.paired_verdict for t in opt.trials):
        return _paired(opt)
    timed = [t for t in opt.trials if _best(t)]
    current = next((t for t in timed if t.current), None)
    if current is None:
        return None  # what the code runs could not be timed: no honest comparison
    fastest = min(timed, key=lambda t: _best(t) or 0.0)
    now, best = _best(current) or 0.0, _best(fastest) or 0.0
    gain = now / best
    if fastest is current or gain < MIN_GAIN:
        return None
    cls, loop = _class(opt), _loop(opt)
    noisy = [t for t in (current, fastest) if t.time_us and t.time_us > NOISY_TRIAL * (_best(t) or 0.0)]
    # Disturbed, but decisive: the fastest's *median* step still beats what runs now
    # at its best (GPT-2's AdamW at load 6: fused 0.80 ms median against a 2.17 ms best loop).
    decisive = fastest.time_us is not None and fastest.time_us * MIN_GAIN <= now
    if noisy and not decisive:
        return _unmeasured(opt, disturbed=max((t.time_us or 0.0) / (_best(t) or 1.0) for t in noisy))
    what = (
        f"{cls}.step dispatched {opt.ops:g} ops per step in per-parameter loops (no _foreach_/_fused_ op)"
        if loop
        else f"{cls}.step runs {current.config}"
    )
    device = f" on {opt.trials_device}" if opt.trials_device else ""
    steps = min(t.steps for t in timed)
    return Finding(
        kind=KIND if loop else KIND_CHOICE,
        severity="warning" if loop else "info",
        file=opt.file,
        line=opt.line,
        message=f"{what}. Measured per step on copies of its parameters, gradients and state{device} "
        f"(unprofiled, best of {steps}): {', '.join(_trial_text(t) for t in opt.trials)}; "
        f"{fastest.config} is fastest, {gain:.2g}× faster than now"
        + (
            " (the host was busy, but even its median step, "
            f"{figures.time_us(fastest.time_us or 0.0)}, beats "
            f"the current best)."
            if noisy
            else "."
        ),
        fix=f"{cls}(..., {fastest.config})",
    )


def _paired(opt: OptimizerStat) -> Finding | None:
    """From the per-round ratios to what runs now (``OptimizerTrial.paired_*``): the
    implementation with the highest paired ratio, named only when its verdict is
    faster (the interval clear of ``pairs.GAIN``) and the ratio at least ``MIN_GAIN``;
    an undecided one is "not measurable on this host now", never a figure."""
    timed = [t for t in opt.trials if _best(t)]
    current = next((t for t in timed if t.current), None)
    others = [t for t in opt.trials if t.paired_ratio and not t.current]
    if current is None or not others:
        return None
    fastest = max(others, key=lambda t: t.paired_ratio or 0.0)
    gain = fastest.paired_ratio or 0.0
    if fastest.paired_verdict != FASTER or gain < MIN_GAIN:
        undecided = [t for t in others if t.paired_verdict == UNDECIDED]
        return _unmeasured(opt, undecided=undecided) if undecided else None
    cls, loop = _class(opt), _loop(opt)
    what = (
        f"{cls}.step dispatched {opt.ops:g} ops per step in per-parameter loops (no _foreach_/_fused_ op)"
        if loop
        else f"{cls}.step runs {current.config}"
    )
    device = f" on {opt.trials_device}" if opt.trials_device else ""
    steps = min(t.steps for t in timed)
    low, high = fastest.paired_low or 0.0, fastest.paired_high or 0.0
    precise = Verdict(gain, fastest.paired_low, fastest.paired_high, steps, FASTER).precise  # the one rule
    size = f"{gain:.2f}× faster" if precise else f"faster by {low:.2f}–{high:.2f}× (median {gain:.2f}×)"
    return Finding(
        kind=KIND if loop else KIND_CHOICE,
        severity="warning" if loop else "info",
        file=opt.file,
        line=opt.line,
        message=f"{what}. Measured per step on copies of its parameters, gradients and state{device} "
        f"(unprofiled, in turn, {steps} rounds; best steps {', '.join(_trial_text(t) for t in opt.trials)}): "
        f"{fastest.config} is fastest, {size} than now (the median of the rounds' ratios, 99% interval "
        f"{low:.2f}–{high:.2f}×{'' if precise else '; its size not measurable to ±15% on this host now'}).",
        fix=f"{cls}(..., {fastest.config})",
    )


def _unmeasured(
    opt: OptimizerStat, disturbed: float | None = None, undecided: list[OptimizerTrial] | None = None
) -> Finding | None:
    """The loop's hint without a measured choice: none was taken, the host disturbed
    it (``disturbed``: the worst median / best of the trials), or the paired verdicts
    of ``undecided`` were not reached."""
    if not _loop(opt):
        return None
    cls = _class(opt)
    time = f", {figures.time_us(opt.self_time_us)}" if opt.self_time_us else ""
    if undecided:
        spans = ", ".join(
            f"{t.config} {t.paired_low or 0:.2f}–{t.paired_high or 0:.2f}×" if t.paired_low else f"{t.config}"
            for t in undecided
        )
        why = (
            f"Timed in turn, the implementations were not measurable on this host now (the 99% intervals "
            f"of their speedups, {spans}, allow no verdict), so none is named; profile again on a quieter "
            f"machine."
        )
    elif disturbed:
        why = (
            f"The measurement on this run was disturbed (a median step {disturbed:.3g}× the best: the host "
            f"was busy), so no implementation is named; profile again on a quieter machine."
        )
    else:
        why = (
            "Not measured on this run: which is faster depends on the device (on CPUs "
            "foreach=True can be slower)."
        )
    return Finding(
        kind=KIND,
        severity="warning",
        file=opt.file,
        line=opt.line,
        message=f"{cls}.step dispatched {opt.ops:g} ops per step{time} in per-parameter "
        f"loops (no _foreach_/_fused_ op): foreach=True runs each update term as "
        f"one _foreach_ op over all parameters, fused=True as one kernel. {why}",
        fix=f"{cls}(..., fused=True) or foreach=True, whichever measures faster",
    )


def with_optimizer_findings(result: Result, findings: list[Finding]) -> list[Finding]:
    """``findings`` plus the optimizer's. The line of an optimizer's step or
    zero_grad never gets the generic dispatch-count finding: a per-parameter loop
    gets the optimizer finding (which names the fix), and a ``foreach``/``fused``
    step's few ops are already what the optimizer does best there."""
    extra = optimizer_findings(result)
    lines = {(o.file, o.line) for o in result.optimizers}
    return [f for f in findings if not (f.kind == "dispatches" and (f.file, f.line) in lines)] + extra

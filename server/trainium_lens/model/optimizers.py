"""A result's optimizers: each one's ``step``/``zero_grad`` and its implementations
timed against each other. Parts of the result document (``model/result.py``)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class OptimizerTrial:
    """One implementation of an optimizer's ``step`` timed by the harness on copies
    of the run's parameters, gradients and state, on the run's device
    (``harness/eager/optim_trials.py``): wall time per ``step()``, synchronized,
    without the profiler."""

    config: str  # "foreach=False" (per-parameter loop) | "foreach=True" | "fused=True"
    current: bool = False  # the implementation the profiled code ran
    time_us: float | None = None  # median over ``steps``; None when it could not run
    # the best step: what the advice compares (a busy host's preemptions fall on the
    # median, never on the best; analysis/findings/optimizer.py)
    time_us_min: float | None = None
    time_us_max: float | None = None
    steps: int = 0
    error: str | None = None  # why it could not run (unsupported here, out of memory...)
    # the current implementation's step / this one's, round by round (harness/pairs.py):
    # their median, its 99 % interval, "faster" | "slower" | "same" | "undecided".
    # None on the current one, or in a result from before they were taken
    paired_ratio: float | None = None
    paired_low: float | None = None
    paired_high: float | None = None
    paired_verdict: str | None = None


@dataclass
class OptimizerStat:
    """One optimizer's ``step``/``zero_grad`` (its ``Optimizer.step#…`` range)."""

    name: str  # "Optimizer.step#AdamW.step"
    file: str  # the line that called it
    line: int
    calls: float
    ops: float  # ATen ops dispatched inside, per step
    fused_ops: float = 0.0  # of which _foreach_* / _fused_*
    self_time_us: float = 0.0
    # schema 3: its implementations measured against each other (``step`` ranges of the
    # eager backends; empty where none was measured)
    trials: list[OptimizerTrial] = field(default_factory=list)
    trials_device: str | None = None  # where they ran ("cpu", "cuda:0", ...)

"""What the attribution pass (``attribution.py``) accumulates: named figures
per op, per line and op, per optimizer range, and the whole ``Attribution``
that ``figures.py`` and ``build.py`` turn into the result document."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field


class OpFigures:
    """One op name's figures over the measured steps (the ``key_averages()`` row)."""

    __slots__ = ("calls", "self_time", "total_time", "cpu", "device")

    def __init__(self) -> None:
        self.calls = 0
        self.self_time = 0.0  # primary clock
        self.total_time = 0.0  # primary clock, nested measured events included
        self.cpu = 0.0  # self CPU time
        self.device = 0.0  # self device time


class LineOpFigures:
    """One op on one line in one phase (backward: per backward node too)."""

    __slots__ = ("calls", "self_time", "cpu", "direct", "order")

    def __init__(self, order: int) -> None:
        self.calls = 0
        self.self_time = 0.0
        self.cpu = 0.0
        self.direct = 0  # top-level: dispatched by the line (or node) itself
        self.order = order  # first-seen order: program order of the line's ops


class OptimizerFigures:
    """One ``Optimizer.step#…`` / ``zero_grad#…`` range name."""

    __slots__ = ("calls", "ops", "fused_ops", "self_time", "key")

    def __init__(self, key: str | None) -> None:
        self.calls = 0  # ranges (optimizer.step() calls)
        self.ops = 0  # measured ops dispatched inside
        self.fused_ops = 0  # of which ``_foreach_*`` / ``_fused_*``
        self.self_time = 0.0
        self.key = key  # the line that called it


@dataclass
class Attribution:
    steps: int
    # (step, label, phase) -> primary / cpu self time, primary total time
    line_self: dict = field(default_factory=lambda: defaultdict(float))
    line_cpu: dict = field(default_factory=lambda: defaultdict(float))
    line_total: dict = field(default_factory=lambda: defaultdict(float))
    line_calls: dict = field(default_factory=lambda: defaultdict(int))  # forward dispatches
    # (step, label, phase) -> host time between ops before that line's ops (cpu clock, paired)
    line_host: dict = field(default_factory=lambda: defaultdict(float))
    # (label, op, phase, backward node) -> LineOpFigures
    line_ops: dict = field(default_factory=dict)
    ops: dict = field(default_factory=dict)  # op -> OpFigures
    phase_time: dict = field(default_factory=lambda: defaultdict(float))  # (step, phase) -> primary
    optimizers: dict = field(default_factory=dict)  # range name -> OptimizerFigures
    # (region name, label) -> [calls, primary time (inclusive), phase]
    regions: dict = field(default_factory=dict)
    windows: dict = field(default_factory=dict)  # label -> [[start, end]] (merged, capped)
    # event id -> (label, phase) for every measured event (twins included): the exporter's lines
    event_lines: dict = field(default_factory=dict)
    device_unowned: float = 0.0
    events: int = 0
    threads: int = 1  # threads whose events were attributed
    paired_steps: int = 0  # labelled steps whose CPU times came from a plain step
    mismatched_steps: int = 0  # labelled steps whose plain partner ran other ops
    backward_nodes: int = 0  # backward ranges seen
    unlinked_nodes: int = 0  # of which with no forward partner
    calls_per_step: int = 1  # calls of the function in each step (figures are per call)
    recorded_steps: int = 0  # steps the profiler recorded (paired: pairs), used or not
    calibrated_us: float = 0.0  # profiler cost subtracted (cpu clock), all used steps
    host_read: bool = False  # line_host was read (cpu clock, paired, calibrated)

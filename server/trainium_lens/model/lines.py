"""Per-line and per-op figures of a result: what a line, an op, a compiled region
cost (units and conventions: model/result.py)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class OpStat:
    """One row of the ``key_averages()`` view (ATen ops only)."""

    name: str
    calls: float
    self_time_us: float
    total_time_us: float
    self_cpu_us: float
    device_time_us: float = 0.0


@dataclass
class LineOp:
    name: str
    calls: float
    self_time_us: float
    self_cpu_us: float = 0.0
    # Calls the line made itself; the rest of ``calls`` ran inside those ops
    # (``aten::mean`` on a bf16 CPU tensor runs ``sum``, ``div_``, ``to``...).
    direct_calls: float = 0.0


@dataclass
class HloRef:
    """An HLO instruction behind a line (backend ``xla``): what the compiler ran.

    A fusion's time is credited to one line (its root instruction's first user
    frame, see ``harness/xla/attribution.py``); every other line it fused lists
    it with ``credited`` false and ``line`` naming where its time went."""

    name: str  # the executed (optimized) instruction, e.g. ``add_rsqrt_fusion``
    module: str = ""  # the HLO module (one per compiled graph)
    opcode: str = ""  # ``fusion``, ``dot``, ``add`` ...
    op_type: str = ""  # the ATen op from the metadata, e.g. ``aten__addmm``
    self_time_us: float = 0.0  # the whole instruction, per step
    calls: float = 0.0
    credited: bool = True
    line: int = 0  # the line credited with its time
    # schema 3: "backward" for an instruction the line's forward ops' autograd nodes caused
    phase: str = "forward"


@dataclass
class BackwardOp:
    """An op the autograd engine ran for a line's forward ops."""

    name: str
    calls: float
    self_time_us: float
    self_cpu_us: float = 0.0
    direct_calls: float = 0.0
    node: str = ""  # the backward node that ran it ("AddmmBackward0", "AccumulateGrad")


@dataclass
class RankLine:
    """One rank's figures for a line of a torchrun job (``--nproc N``)."""

    rank: int
    self_time_us: float
    total_time_us: float
    # collective lines: this rank's collective time minus the fastest rank's,
    # i.e. the time it waited for the others
    wait_us: float = 0.0
    collective_us: float = 0.0  # this rank's time in the line's collective ops
    node: str | None = None  # a job across nodes: the host name of this rank's node


@dataclass
class LineStat:
    file: str
    line: int
    self_time_us: float
    total_time_us: float
    self_cpu_us: float
    calls: float  # ops dispatched directly from this line, per step
    # ``ops``: first what the line dispatched itself (``direct_calls`` > 0) in
    # program order, then the ops nested inside them, by self time.
    self_time_us_min: float = 0.0
    self_time_us_max: float = 0.0
    self_time_us_median: float = 0.0
    text: str = ""  # the source line as profiled (the editor may have moved on)
    function: str = ""  # enclosing user function
    ops: list[LineOp] = field(default_factory=list)
    hits: float | None = None  # executions of the line per call (None: not counted)
    instructions: list[HloRef] = field(default_factory=list)  # backend xla only
    # schema 2. ``self_time_us``/``total_time_us`` keep meaning *forward*; the backward
    # the line's forward ops caused (self: its own ops; total: through the user
    # helpers it called), spread over the measured steps, and the ops that ran it.
    backward_self_time_us: float = 0.0
    backward_total_time_us: float = 0.0
    backward_self_cpu_us: float = 0.0
    backward_self_time_us_min: float = 0.0
    backward_self_time_us_max: float = 0.0
    backward_self_time_us_median: float = 0.0
    backward_ops: list[BackwardOp] = field(default_factory=list)
    # forward re-run inside the backward (torch.utils.checkpoint): not forward time again
    recompute_time_us: float = 0.0
    recompute_ops: list[LineOp] = field(default_factory=list)
    # torchrun jobs only (empty/None for one process): the figures above are the
    # median across ranks; each rank's, the spread and the slowest rank here
    per_rank: list[RankLine] = field(default_factory=list)
    rank_min_us: float | None = None
    rank_max_us: float | None = None
    slowest_rank: int | None = None
    # Neuron device time per engine (union of the line's instruction intervals on
    # that engine, per step): xla runs on Trn1 whose device profile was read
    engines: list[EngineTime] = field(default_factory=list)
    # schema 3: the share (0..1) of the line's torch calls made inside code outside the
    # user's files and outside torch (``self.act(x)`` running transformers' GELU), and
    # those modules, most calls first; None: not counted (older results, backend xla)
    via_library: float | None = None
    library_modules: list[str] = field(default_factory=list)
    # schema 3: ``time_us`` (forward + backward + recompute self time) in each measured
    # step, in order; their mean is ``time_us``. Empty in results before schema 3.
    step_us: list[float] = field(default_factory=list)
    # cpu clock: host time before this line's ops (Python, the autograd engine), per call
    host_time_us: float = 0.0
    # schema 3: work per call (docs/protocol.md, "Schema 3"); None: not measured.
    # FLOPs: matmul/conv/attention ops (eager: from recorded shapes; xla: HLO shapes;
    # Neuron device profile: adjusted_flops). Bytes moved: an estimate (eager: tensor
    # inputs + outputs of the ops the line dispatched). Backward: the ops the autograd
    # engine ran for the line's forward ops (recompute included).
    flops: float | None = None
    bytes: float | None = None
    backward_flops: float | None = None
    backward_bytes: float | None = None
    dtype: str | None = None  # of its FLOP-heaviest op (else byte-heaviest): picks the peak
    # memory (eager: allocator events of the work call; xla: HLO buffer sizes)
    alloc_bytes: float | None = None  # allocated by its forward ops, still held when they returned
    saved_bytes: float | None = None  # storages it saved for backward (each storage once, first saver)
    saved_activation_bytes: float | None = None  # of those, allocated during the step (not params/inputs)
    peak_bytes: float | None = None  # its tensors live at the step's memory peak

    @property
    def time_us(self) -> float:
        """Forward + backward + recompute self time: what the line costs a step."""
        return self.self_time_us + self.backward_self_time_us + self.recompute_time_us


@dataclass
class EngineTime:
    engine: str  # a NeuronCore engine as the device profile names it ("pe", "act", ...)
    time_us: float


@dataclass
class SourceLine:
    file: str
    line: int


@dataclass
class Region:
    """A torch.compile region ("Torch-Compiled Region: i/j")."""

    name: str
    file: str  # the user line that called the compiled function
    line: int
    self_time_us: float
    calls: float
    covered_lines: list[SourceLine] = field(default_factory=list)
    fx_nodes: int = 0  # ops the graph fused into this region
    # schema 3: "backward" for AOTAutograd's compiled backward (``CompiledFunctionBackward``),
    # credited to the line whose compiled forward made it; covered lines: the forward graph's
    phase: str = "forward"

"""The result of profiling one function: a typed, versioned JSON document.

Everything above the targets works from results alone (the editor, the CLI's
``show``, comparisons), so a stored result can be re-opened without hardware.

Conventions that every layer relies on:

* Every time and count is **per step**, i.e. per call of the profiled function:
  the sum over the active (measured) steps divided by their number. Spread
  over the active steps is kept beside the figures that have it
  (``*_min``/``*_max``/``*_median``).
* ``self_time_us`` is always the **primary clock** of the backend
  (``clock``): Neuron device time, CUDA kernel time, or CPU self time. The
  CPU figure is also kept separately as ``self_cpu_us`` so a UI can never show
  a CPU number as device time by accident. Schema 3: on the ``cpu`` clock
  ``self_time_us`` is *calibrated* (the profiler's measured cost per op event
  subtracted, see ``Calibration``) and ``self_cpu_us`` stays the raw profiler
  figure beside it.
* ``file`` is relative to the workspace root, with ``/`` separators; ``line``
  is 1-based.

The harness writes a *batch* (one document per profiled function, see
``Batch``); the core adds ``findings`` and stores each result on its own.
"""

from __future__ import annotations

import json
from dataclasses import MISSING, asdict, dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any, get_args, get_origin, get_type_hints

from trainium_lens.harness.spec import BACKENDS as SPEC_BACKENDS
from trainium_lens.model.paths import is_run_id

# 2: backward/recompute per line, totals split, optimizers
# 3: optional fields only (a schema-2 file loads unchanged): docs/architecture.md, "Schema 3"
SCHEMA_VERSION = 3

BACKENDS = tuple(b for b in SPEC_BACKENDS if b != "auto")  # what a result can have run on


class ResultError(ValueError):
    """A result file that cannot be used; the message says why in one line."""


@dataclass
class Protocol:
    wait: int = 2
    warmup: int = 1
    active: int = 5
    timing_calls: int = 20  # unprofiled calls timed after profiling


@dataclass
class FunctionRef:
    file: str
    name: str
    line: int  # the line of the ``def``
    protocol: Protocol = field(default_factory=Protocol)
    marker_line: int | None = None  # the ``# trainium: profile`` comment
    inputs: str | None = None  # the marker's ``inputs=`` function (variants share it)
    compare: str | None = None  # the marker's ``compare=`` group, if any


@dataclass
class Environment:
    python: str = ""
    torch: str = ""
    torch_neuronx: str | None = None
    neuron_flavour: str | None = None  # "native" (TorchNeuron) | "xla" | None
    instance_type: str | None = None
    neuron_cores: int | None = None
    device_name: str | None = None
    platform: str = ""


@dataclass
class Totals:
    self_time_us: float  # primary clock, all ops (forward + backward + optimizer), per step
    self_cpu_us: float
    wall_us_median: float | None  # unprofiled, synchronized, per call
    steps: int  # active steps measured
    self_time_us_min: float = 0.0
    self_time_us_max: float = 0.0
    wall_us_min: float | None = None
    wall_us_max: float | None = None
    dispatches: float = 0.0  # ATen ops dispatched from user code per step
    per_step_self_time_us: list[float] = field(default_factory=list)
    # schema 2: self_time_us split by what ran (unattributed ops included); they sum to it
    forward_time_us: float = 0.0  # forward ops outside the optimizer
    backward_time_us: float = 0.0  # ops under the autograd engine's backward nodes
    optimizer_time_us: float = 0.0  # ops under Optimizer.step / zero_grad
    recompute_time_us: float = 0.0  # forward re-run inside the backward (checkpointing)
    # schema 3: the primary-clock time of each measured step, in order (as many as
    # the run measured; one where a device profile replaced the figures). What the
    # regression gate (analysis/gate/judge.py) judges noise from.
    step_us: list[float] = field(default_factory=list)

    @property
    def samples(self) -> list[float]:
        """Per-step samples: ``step_us``, else a schema-2 run's ``per_step_self_time_us``."""
        return self.step_us or self.per_step_self_time_us

    calls_per_step: int = 1  # back-to-back calls in each measured step (cpu clock, tiny functions)
    # device-side elapsed per unprofiled call (CUDA events: kernels and the idle gaps between them)
    device_span_us_median: float | None = None
    # cpu clock: host time between ops per call (Python, the autograd engine), in no op's
    # figure; each line holds the gaps before its ops (``LineStat.host_time_us``). None: not read
    host_time_us: float | None = None

    @property
    def has_backward(self) -> bool:
        return self.backward_time_us > 0 or self.recompute_time_us > 0


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
    # schema 3: work per call (docs/architecture.md, "Schema 3"); None: not measured.
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


@dataclass
class H2DCopy:
    """A line whose calls copied host→device (a CPU tensor fed into a device op)."""

    file: str
    line: int
    calls: float
    self_time_us: float = 0.0


@dataclass
class Bucket:
    """Schema 3 (backend ``xla``): time that belongs to no source line but is
    known for what it is, e.g. ``graph plumbing`` (copies of graph inputs to
    outputs, tuples of outputs). Lines + buckets + ``unattributed_us`` = total."""

    name: str
    self_time_us: float  # per step
    calls: float = 0.0  # instructions executed per step
    instructions: list[str] = field(default_factory=list)  # the biggest, by name


@dataclass
class HostSync:
    """Schema 3 (backend ``xla``): a line whose calls made torch-xla execute a graph
    or copy to the host in the middle of the step (``.item()``, ``print(t)``)."""

    file: str
    line: int
    calls: float  # such calls per step
    graphs: float = 0.0  # graphs executed inside them, per step
    transfers: float = 0.0  # device→host copies inside them, per step
    what: list[str] = field(default_factory=list)  # the torch calls ("item", "__format__")


@dataclass
class XlaFallback:
    """Schema 3 (backend ``xla``): an ATen op torch-xla ran on the CPU, on the line
    that called it (``line`` 0: not seen from a user line)."""

    op: str  # "aten::nonzero"
    file: str
    line: int
    calls: float  # per step


@dataclass
class Finding:
    kind: str  # "dispatches" | "h2d_copy" | "cpu_fallback" | "no_device_time" | "compile_in_steps" | ...
    severity: str  # "error" | "warning" | "info" | "hint"
    file: str
    line: int
    message: str
    fix: str | None = None


@dataclass
class NeffPair:
    neff: str | None
    ntff: str | None


@dataclass
class NeuronView:
    """A captured device profile processed on the host by ``neuron-explorer view``:
    one NEFF/NTFF pair (backend xla on Trn1, runtime model mode) or one TorchNeuron
    session folder (backend neuron on Trn2/Trn3); paths on the run's host."""

    neff: str | None = None
    ntff: str | None = None  # the NTFF (model mode) or the session folder (session mode)
    parquet: str | None = None  # the ``--output-file`` folder of Parquet tables (or a JSON file)
    error: str | None = None  # why there is no Parquet folder (one line)
    # schema 3: which executions the profile holds. "model": each NEFF's one captured
    # execution (the first measured step); "session": every execution of ``steps``
    # profiled steps (the core divides by it, checked against ExecutionInfo)
    mode: str = "model"
    steps: int = 1


@dataclass
class Artifacts:
    location: str = "local"  # "local" or the SSH host that holds them
    run_dir: str = ""  # absolute path on that host
    trace: str | None = None  # Chrome-trace JSON with the user-line ranges
    neuron_profile_dir: str | None = None
    neff_ntff: list[NeffPair] = field(default_factory=list)
    # the workspace root on the host (where the profiled code ran from): strips the
    # device profile's absolute file names; Neuron Explorer's --framework-source-root
    source_root: str | None = None
    neuron_views: list[NeuronView] = field(default_factory=list)


@dataclass
class Window:
    start_us: float  # trace clock (the trace file's ``ts`` values)
    dur_us: float


@dataclass
class LineWindows:
    file: str
    line: int
    windows: list[Window] = field(default_factory=list)


@dataclass
class RankRun:
    """One rank of a torchrun job: its totals and where its artifacts are."""

    rank: int
    self_time_us: float
    self_cpu_us: float = 0.0
    wall_us_median: float | None = None
    wait_us: float = 0.0  # time waiting for other ranks in collectives, per step
    collective_us: float = 0.0  # time in collective ops (waiting included), per step
    artifacts: Artifacts = field(default_factory=Artifacts)
    timeline: list[LineWindows] = field(default_factory=list)  # this rank's trace clock


@dataclass
class Signals:
    """Raw observations from the harness; analysis turns them into findings."""

    device_time_reported: bool = True
    cpu_fallback_ops: list[str] = field(default_factory=list)
    h2d_copies: list[H2DCopy] = field(default_factory=list)
    h2d_copy_lines: list[SourceLine] = field(default_factory=list)
    compiles_in_active_steps: int = 0
    recompiles: int = 0
    graph_breaks: int = 0
    neuron_rt_inspect_clash: bool = False
    warnings: list[str] = field(default_factory=list)
    instrumentation_overhead: float | None = None  # instrumented/plain wall ratio
    # xla on Trn1, or neuron without key_averages() device time: why the device profile
    # gave no per-line time (the host figures stay)
    neuron_profile_error: str | None = None
    # schema 3, backend xla (torch_xla.debug.metrics over the measured steps)
    graphs_per_step: float | None = None  # graphs executed per step (median); 1 is one graph
    host_syncs: list[HostSync] = field(default_factory=list)
    xla_fallbacks: list[XlaFallback] = field(default_factory=list)


@dataclass
class PeakFlops:
    dtype: str  # "float32", "bfloat16", ... (torch's dtype names)
    flops_per_s: float


@dataclass
class Roof:
    """The device's peaks a line is measured against, and where they came from.

    The harness writes the measured CPU roof (and, on CUDA, the device name and
    TF32 mode); ``analysis/roofline/peaks.py`` fills a device's from its tables."""

    device: str = ""
    flops: list[PeakFlops] = field(default_factory=list)  # peak FLOP/s per dtype
    bytes_per_s: float = 0.0  # memory bandwidth
    source: str = ""  # e.g. "measured on this host ...", "Neuron docs: trn1 ..."
    measured: bool = False  # measured on the host (CPU) rather than from a table
    cores: int | None = None  # CPU threads / NeuronCores the figures are for
    measured_at: str | None = None
    tf32: bool | None = None  # CUDA: fp32 matmuls run as TF32 (torch.backends.cuda.matmul.allow_tf32)


@dataclass
class Work:
    """How the per-line FLOPs and bytes were obtained, and the function's sums (per call)."""

    source: str = ""  # "shapes" (eager) | "hlo" (xla) | "neuron-profile"
    flops: float = 0.0  # forward + backward, every op (unattributed included)
    bytes: float = 0.0
    unattributed_flops: float = 0.0
    note: str = ""


@dataclass
class Memory:
    """The step's memory: its peak and who holds it (bytes)."""

    device: str = ""
    available: bool = False
    peak_bytes: float = 0.0  # largest rise above what was allocated when the step began
    peak_phase: str = ""  # "forward" | "backward" | "recompute" | "optimizer"
    peak_file: str | None = None  # the line whose op reached the peak
    peak_line: int | None = None
    unattributed_peak_bytes: float = 0.0  # live at the peak, made by no user line
    held_before_bytes: float | None = None  # allocated when the step began (CUDA allocator; else unknown)
    allocator_peak_bytes: float | None = None  # CUDA: torch.cuda.max_memory_allocated over the step
    saved_bytes: float | None = None  # every storage saved for backward (None: not watched)
    source: str = ""
    note: str | None = None  # why something is not available


@dataclass
class CalibrationWorkload:
    workload: str
    events: int
    unprofiled_us: float
    profiled_us: float  # Σ self time of its events under the profiler


@dataclass
class Calibration:
    """Schema 3, ``cpu`` clock only: the profiler's own cost per op event, measured
    at the start of the run under the same profiler settings
    (``harness/eager/calibrate.py``). An event nested ``d`` ops deep costs
    ``per_depth_us × d`` inside the measured windows; that is subtracted from
    every primary figure (``self_cpu_us`` figures stay raw)."""

    per_depth_us: float
    per_top_us: float = 0.0  # a top-level op's cost between ops (in the gaps host time reads)
    gap_factor: float = 1.0  # how much slower Python between ops runs while the profiler records
    cost_s: float = 0.0  # the calibration's own time in this run
    profiler_start_s: float = 0.0  # the profiler's first start (paid once per run anyway)
    subtracted_us: float = 0.0  # taken off this function, per call
    workloads: list[CalibrationWorkload] = field(default_factory=list)


@dataclass
class Stability:
    """Schema 3: what the host did while the function was measured
    (``harness/eager/steady.py``, ``host.py``); ``analysis/noise.py`` judges it."""

    steps_wanted: int = 0  # the protocol's active steps
    steps_measured: int = 0  # measured (paired: pairs), extra steps included
    steps_clean: int = 0  # of which no thread of ours waited for a CPU
    steps_used: int = 0  # in the figures (the clean ones, or all if too few were clean)
    extra_steps: int = 0
    run_delay_share: float | None = None  # run-queue delay / wall over the measured steps
    step_switches: float | None = None  # involuntary context switches per measured step
    window_s: float | None = None  # from settling to the last timing call
    others_cores: float | None = None  # CPU of other processes in that window, in cores
    involuntary_switches: int | None = None  # in that window
    settle_calls: int = 0
    calls_per_step: int = 1
    timing_calls: int = 0  # unprofiled calls made (the wall's)
    timing_clean: int = 0  # of which undisturbed


@dataclass
class Reconciliation:
    """Schema 3: the result against an independent measurement on the same host
    (``analysis/reconcile.py``): the profiled figure per call over the unprofiled
    wall median (cpu clock), or the device time over the device-side span of an
    unprofiled call (cuda), else over the wall (neuron, xla)."""

    reference: str  # "wall" | "device_span"
    reference_us: float
    profiled_us: float  # the primary figure per call (cpu clock: calibrated, plus the host time between ops)
    raw_us: float | None  # the uncalibrated figure, where it differs
    ratio: float  # profiled / reference
    tolerance: float  # |ratio - 1| allowed (device clocks: only above 1)
    within: bool
    note: str = ""  # why a ratio outside the tolerance can be expected, when it can


@dataclass
class Output:
    """What the function returned, for comparing variants of one file."""

    dtype: str | None = None
    shape: list[int] | None = None
    reference: str | None = None  # the first variant of the batch
    max_abs_diff: float | None = None  # against the reference's output
    max_abs: float | None = None  # largest |element| of this output (relative tolerance)


@dataclass
class GitState:
    """The code a run measured (schema 3): the workspace's git state when the run
    began, recorded on this machine by ``engine/provenance.py`` (the harness may run
    on a host that has no ``.git``)."""

    commit: str | None = None  # HEAD's full hash; None outside a git work tree
    dirty: bool = False  # tracked files differed from HEAD, or the profiled file is untracked
    branch: str | None = None  # None on a detached HEAD

    @property
    def short(self) -> str:
        """``3f2a9c1`` / ``3f2a9c1+dirty`` / ``-`` (no git)."""
        if not self.commit:
            return "-"
        return self.commit[:7] + ("+dirty" if self.dirty else "")


@dataclass
class LibraryFile:
    """A file of an included package (``--include``): its module path, as the
    result's lines name it, and where it lies on the host that ran the profile."""

    file: str  # e.g. "torch/nn/functional.py"
    path: str  # absolute path on the host


@dataclass
class Result:
    run_id: str
    created_at: str  # ISO 8601, UTC
    backend: str
    # which clock ``self_time_us`` is: the backend's name, or ``xla-cpu`` (host
    # time per HLO instruction on torch-xla's CPU device, never device time)
    clock: str
    host: str
    function: FunctionRef
    totals: Totals
    environment: Environment = field(default_factory=Environment)
    ops: list[OpStat] = field(default_factory=list)
    lines: list[LineStat] = field(default_factory=list)
    regions: list[Region] = field(default_factory=list)
    optimizers: list[OptimizerStat] = field(default_factory=list)
    unattributed_us: float = 0.0
    buckets: list[Bucket] = field(default_factory=list)  # schema 3 (xla): named, not unattributed
    findings: list[Finding] = field(default_factory=list)
    artifacts: Artifacts = field(default_factory=Artifacts)
    timeline: list[LineWindows] = field(default_factory=list)
    signals: Signals = field(default_factory=Signals)
    output: Output = field(default_factory=Output)
    batch_id: str | None = None
    schema_version: int = SCHEMA_VERSION
    library_files: list[LibraryFile] = field(default_factory=list)  # included packages' files
    # torchrun jobs only (``--nproc N``, see model/ranks.py); absent from a one-process result
    ranks: list[RankRun] = field(default_factory=list)
    world_size: int = 1
    git: GitState = field(default_factory=GitState)  # schema 3: the commit this run measured
    # schema 3: what the device could do, how the work was counted, the step's memory
    roof: Roof | None = None
    work: Work | None = None
    memory: Memory | None = None
    # schema 3 (None in older results)
    calibration: Calibration | None = None
    stability: Stability | None = None
    reconciliation: Reconciliation | None = None

    # -- conveniences used by every consumer --------------------------------
    @property
    def per_call_us(self) -> float:
        """The time one call costs in the primary clock, as reconciled against the
        wall: on the cpu clock the ops plus the host time between them (the Python a
        call runs, ``Totals.host_time_us``); on a device clock the kernels alone."""
        host = self.totals.host_time_us if self.clock == "cpu" else None
        return self.totals.self_time_us + (host or 0.0)

    def line(self, file: str, line: int) -> LineStat | None:
        for stat in self.lines:
            if stat.line == line and stat.file == file:
                return stat
        return None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        if not self.ranks:  # a one-process run keeps the shape it always had
            _drop_rank_fields(data)
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1)

    @classmethod
    def from_dict(cls, data: Any) -> Result:
        if not isinstance(data, dict):
            raise ResultError("not a Trainium Lens result: expected a JSON object")
        version = data.get("schema_version")
        if not isinstance(version, int):
            raise ResultError("not a Trainium Lens result: no schema_version")
        if version > SCHEMA_VERSION:
            raise ResultError(
                f"result has schema version {version}; this Trainium Lens reads up to "
                f"{SCHEMA_VERSION}: upgrade trainium-lens"
            )
        if version < 2:
            data = _upgrade_v1(data)
        result = _build(cls, data, "result")
        if result.backend not in BACKENDS:
            raise ResultError(f"result.backend: unknown backend {result.backend!r}")
        # Ids become file names (the store, the artifacts cache): plain names only.
        if not is_run_id(result.run_id):
            raise ResultError(f"result.run_id: not a valid run id: {result.run_id[:80]!r}")
        if result.batch_id and not is_run_id(result.batch_id):
            raise ResultError(f"result.batch_id: not a valid batch id: {result.batch_id[:80]!r}")
        return result


@dataclass
class Batch:
    """What the harness writes: the results of one job (one or more functions)."""

    batch_id: str
    results: list[Result]
    schema_version: int = SCHEMA_VERSION

    @classmethod
    def from_dict(cls, data: Any) -> Batch:
        if not isinstance(data, dict) or not isinstance(data.get("results"), list):
            raise ResultError("not a Trainium Lens batch: expected an object with results[]")
        return cls(
            batch_id=str(data.get("batch_id", "")),
            results=[Result.from_dict(r) for r in data["results"]],
        )


def _upgrade_v1(data: dict) -> dict:
    """Schema 1 → 2: no backward figures (they default to 0; ``schema_version``
    stays 1 so a reader can tell "not measured" from "none"); ``h2d_copies``
    named their line ``"file:line"``."""
    signals = data.get("signals")
    if isinstance(signals, dict) and isinstance(signals.get("h2d_copies"), list):
        copies = []
        for c in signals["h2d_copies"]:
            if isinstance(c, dict) and "name" in c and "file" not in c:
                file, _, line = str(c["name"]).rpartition(":")
                c = {
                    "file": file,
                    "line": int(line) if line.isdigit() else 0,
                    "calls": c.get("calls", 0.0),
                    "self_time_us": c.get("self_time_us", 0.0),
                }
            copies.append(c)
        data = {**data, "signals": {**signals, "h2d_copies": copies}}
    return data


_RANK_LINE_FIELDS = ("per_rank", "rank_min_us", "rank_max_us", "slowest_rank")


def _drop_rank_fields(data: dict[str, Any]) -> None:
    data.pop("ranks", None)
    data.pop("world_size", None)
    for line in data.get("lines") or []:
        for key in _RANK_LINE_FIELDS:
            line.pop(key, None)


#: A stored result larger than this is not read (a real one with thousands of
#: lines is a few MB; a runaway file must not take the editor's memory).
MAX_RESULT_BYTES = 256 * 1024 * 1024


def load(path: str | Path) -> Result:
    """Read and validate one stored result; ``ResultError`` says what is wrong,
    whatever the damage (unreadable, not UTF-8, not JSON, nested past the
    parser's depth, the wrong shape)."""
    path = Path(path)
    try:
        if path.stat().st_size > MAX_RESULT_BYTES:
            raise ResultError(f"{path}: larger than {MAX_RESULT_BYTES >> 20} MiB, not read")
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ResultError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ResultError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ResultError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    except RecursionError:
        raise ResultError(f"{path}: JSON nested too deeply to be a result") from None
    try:
        return Result.from_dict(data)
    except RecursionError:
        raise ResultError(f"{path}: nested too deeply to be a result") from None


def save(result: Result, path: str | Path) -> Path:
    """Write atomically: a reader never sees half a file, a crash loses nothing,
    and a failed write (a full disk) leaves no temporary file behind."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        tmp.write_text(result.to_json(), encoding="utf-8")
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


# -- validation: build dataclasses from plain JSON, checking types -------------
#
# One converter per type, built once: a stored result with thousands of lines is
# re-opened by the editor on every start, so validation must cost little more
# than the JSON parse. The path of a bad value is assembled only on error.


class _Bad(Exception):
    def __init__(self, message: str, path: str = ""):
        self.message, self.path = message, path

    def under(self, step: str) -> _Bad:
        self.path = step + self.path
        return self


def _build(tp: Any, value: Any, where: str) -> Any:
    try:
        return _converter(tp)(value)
    except _Bad as bad:
        raise ResultError(f"{where}{bad.path}: {bad.message}") from None


_CONVERTERS: dict[Any, Any] = {}


def _converter(tp: Any) -> Any:
    conv = _CONVERTERS.get(tp)
    if conv is None:
        conv = _CONVERTERS[tp] = _make_converter(tp)
    return conv


def _got(value: Any) -> str:
    return f"got {value!r:.40}"


def _make_converter(tp: Any) -> Any:
    if isinstance(tp, type) and is_dataclass(tp):
        hints = get_type_hints(tp)
        items = [(f.name, _converter(hints[f.name])) for f in fields(tp)]
        required = [f.name for f in fields(tp) if f.default is MISSING and f.default_factory is MISSING]

        def conv_dataclass(value: Any) -> Any:
            if type(value) is not dict:
                raise _Bad("expected an object")
            for name in required:
                if name not in value:
                    raise _Bad(f"missing '{name}'")
            kwargs = {}
            for name, conv in items:
                if name in value:
                    try:
                        kwargs[name] = conv(value[name])
                    except _Bad as bad:
                        raise bad.under(f".{name}") from None
            return tp(**kwargs)

        return conv_dataclass
    origin = get_origin(tp)
    if origin is list:
        (item_type,) = get_args(tp)
        item = _converter(item_type)

        def conv_list(value: Any) -> list:
            if type(value) is not list:
                raise _Bad("expected a list")
            out = []
            for i, v in enumerate(value):
                try:
                    out.append(item(v))
                except _Bad as bad:
                    raise bad.under(f"[{i}]") from None
            return out

        return conv_list
    if origin is not None:  # X | None
        (inner_type,) = [a for a in get_args(tp) if a is not type(None)]
        inner = _converter(inner_type)
        return lambda value: None if value is None else inner(value)
    if tp is float:

        def conv_float(value: Any) -> float:
            kind = type(value)
            if kind is float:
                return value
            if kind is int:
                return float(value)
            raise _Bad(f"expected a number, {_got(value)}")

        return conv_float
    simple = {int: "an integer", str: "a string", bool: "true/false"}
    if tp in simple:

        def conv_simple(value: Any) -> Any:
            if type(value) is not tp:
                raise _Bad(f"expected {simple[tp]}, {_got(value)}")
            return value

        return conv_simple
    return lambda value: value

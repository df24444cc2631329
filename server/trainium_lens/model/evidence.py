"""How far a result's figures can be trusted, and what a line's work was:
calibration, stability, reconciliation; FLOPs, bytes, memory and the roof
(units and conventions: model/result.py)."""

from __future__ import annotations

from dataclasses import dataclass, field


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
    cost_s: float = 0.0  # the calibration's own time in this run (0: read from the shared file)
    profiler_start_s: float = 0.0  # the profiler's first start (paid once per run anyway)
    subtracted_us: float = 0.0  # taken off this function, per call
    workloads: list[CalibrationWorkload] = field(default_factory=list)
    # the host time between ops as the gaps read it (per call), and the factor (≤ 1) that
    # bounds it by what the unprofiled wall leaves beside the ops (attribution/build.py)
    host_read_us: float | None = None
    host_scale: float = 1.0
    # what the calibration read per nesting level, where the wall bounded what was
    # subtracted (then ``per_depth_us`` is the share applied; build.calibration_kept)
    per_depth_read_us: float | None = None
    # "measured" (this run's own), "measured (shared with later runs)" / "(busy host: not
    # shared)", or "shared: FILE, measured WHEN" ($TRAINIUM_LENS_CALIBRATION,
    # harness/eager/calibration_store.py)
    source: str = "measured"


@dataclass
class Stability:
    """Schema 3: what the host did while the function was measured
    (``harness/eager/steady.py``, ``harness/runtime/host.py``); ``analysis/noise.py`` judges it."""

    steps_wanted: int = 0  # the protocol's active steps
    steps_measured: int = 0  # measured (paired: pairs), extra steps included
    steps_clean: int = 0  # of which no thread of ours waited for a CPU
    steps_used: int = 0  # in the figures (the clean ones, or all if too few were clean)
    extra_steps: int = 0
    run_delay_share: float | None = None  # run-queue delay / wall over the measured steps
    step_switches: float | None = None  # involuntary context switches per measured step
    window_s: float | None = None  # from settling to the last timing call
    others_cores: float | None = None  # CPU of processes outside the job in that window, in cores
    # the job's own other processes (sibling ranks, launcher: harness/runtime/outside.py),
    # counted apart: they share the cores, but they are the job's shape, not outside load
    job_cores: float | None = None
    job_processes: int | None = None
    cpus: int | None = None  # the CPUs this process may run on
    threads: int | None = None  # torch's intra-op threads (cpu clock): noise.py's hint under outside load
    outside_top: list[str] = field(default_factory=list)  # "comm (pid N) 0.98 cores", most first
    # pressure stall information over the window (/proc/pressure), share of its wall; and
    # the hypervisor's steal time, in cores. None: the host does not provide it
    cpu_pressure_some: float | None = None
    cpu_pressure_full: float | None = None
    memory_pressure_some: float | None = None
    memory_pressure_full: float | None = None
    steal_cores: float | None = None
    involuntary_switches: int | None = None  # in that window
    settle_calls: int = 0
    # cpu clock: the unprofiled wall just before the profiled steps (the fastest of 5
    # samples shaped as the timing calls'): the wall's speed then (analysis/reconcile.py)
    wall_before_us: float | None = None
    calls_per_step: int = 1
    timing_calls: int = 0  # unprofiled calls made (the wall's)
    timing_clean: int = 0  # of which undisturbed
    timing_used: int = 0  # in the wall's median (the clean ones, or all if too few were clean)
    timing_batch: int = 1  # back-to-back calls per timing sample (one timer pair each)
    timing_loop_us: float = 0.0  # the timing loop's own cost per sample, measured empty and subtracted
    # variants of one comparison timed in turn after the batch (harness/eager/paired.py)
    paired_rounds: int = 0
    paired_clean: int = 0
    paired_s: float = 0.0  # seconds of timing in turn
    paired_bound_s: int = 0  # the marker's paired_s=: rounds until a verdict or this (0: fixed rounds)


@dataclass
class Reconciliation:
    """Schema 3: the result against an independent measurement on the same host
    (``analysis/reconcile.py``): the profiled figure per call, as the fit to the wall
    left it untouched (``Result.fit``), over the unprofiled wall median (cpu clock),
    or the device time over the device-side span of an unprofiled call (cuda), else
    over the wall (neuron, xla)."""

    reference: str  # "wall" | "device_span"
    reference_us: float
    # the figure per call compared (cpu clock: ops with the calibration as read plus the host
    # time between ops as read — unfitted, ``Result.fit`` — where the result has a fit block)
    profiled_us: float
    raw_us: float | None  # the uncalibrated figure, where it differs
    ratio: float  # profiled / reference
    tolerance: float  # |ratio - 1| allowed (device clocks: only above 1)
    within: bool
    note: str = ""  # why a ratio outside the tolerance can be expected, when it can
    shown_us: float | None = None  # the figure shown (fitted to the wall), where it differs from profiled_us

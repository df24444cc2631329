"""What a result is of and where it ran: the function and its protocol
(``FunctionRef``, ``Protocol``), the script of a ``run`` (``ScriptRun``), the
environment, the code's git state, the included packages' files and what the
function returned (``Output``). Parts of the result document (``model/result.py``)."""

from __future__ import annotations

from dataclasses import dataclass, field


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
class Output:
    """What the function returned, for comparing variants of one file."""

    dtype: str | None = None
    shape: list[int] | None = None
    reference: str | None = None  # the first variant of the batch
    max_abs_diff: float | None = None  # against the reference's output
    max_abs: float | None = None  # largest |element| of this output (relative tolerance)
    tensors: int = 1  # tensors returned (all are compared; dtype and shape are the first's)
    mismatch: str | None = None  # why the tensors cannot be compared (count, a later one's shape)


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
class XlaGraph:
    """One graph of the step torch-xla's execution log repeats."""

    hash: str = ""  # the log's graph hash, cut to 12 hex digits
    cause: str = ""  # what executed it ("user torch_xla.sync", "torch_xla.sync in parallel loader …")


@dataclass
class XlaStepCheck:
    """The steps found against torch-xla's own log of executions
    (``harness/xla/debug_log.py``): ``PT_XLA_DEBUG_LEVEL=2`` to a file, or, where the
    script sets that variable itself, the graphs counted per step by its metrics."""

    source: str = ""  # "PT_XLA_DEBUG_LEVEL=2" | "metrics"
    graphs_per_step: list[int] = field(default_factory=list)  # each measured step's executions
    period: int | None = None  # the log's repeating pattern: graphs per turn
    pattern: list[XlaGraph] = field(default_factory=list)
    agrees: bool = False  # each step found is one turn of the pattern
    why: str | None = None  # why the metrics were used


@dataclass
class ScriptRun:
    """A ``trainium-lens run`` result: the unmodified command whose steps were
    profiled (``harness/script/``); ``None`` for a marked function."""

    command: list[str] = field(default_factory=list)
    launcher: str = "python"  # "python" | "torchrun"
    steps: list[int] = field(default_factory=list)  # [N, M]: the measured steps asked for
    profiled_steps: list[int] = field(default_factory=list)  # [first, last] recorded (cpu: with twins)
    detector: str = ""  # "optimizer" | "forward" | "step-on" | "trainer": what found the steps
    # what a framework's detector (``harness/script/frameworks.py``) said of the window's
    # steps: its own step numbers (the Trainer's ``global_step``) of the first and last,
    # the micro-batches each step held (gradient accumulation), the updates it skipped
    framework_steps: list[int] = field(default_factory=list)
    micro_batches: int | None = None
    skipped_steps: int = 0
    reference_before: int = 0  # unprofiled steps timed before the window (the reference)
    reference_after: int = 0  # and after it
    # the step's wait for data: a DataLoader's __next__ per step (median over the
    # unprofiled reference steps) and the line that called it (the loop's ``for``)
    data_wait_us: float | None = None
    data_file: str | None = None
    data_line: int | None = None
    xla_log: XlaStepCheck | None = None  # the xla backend's cross-check of the steps

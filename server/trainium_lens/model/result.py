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
import os
import re
import stat as stat_mode
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from trainium_lens.harness.spec import BACKENDS as SPEC_BACKENDS
from trainium_lens.model.codec import ResultError, build, refuse_constant
from trainium_lens.model.evidence import Calibration, Memory, Reconciliation, Roof, Stability, Work
from trainium_lens.model.files import write_file
from trainium_lens.model.lines import LineStat, OpStat, Region, SourceLine
from trainium_lens.model.paths import is_run_id

# 2: backward/recompute per line, totals split, optimizers
# 3: optional fields only (a schema-2 file loads unchanged): docs/protocol.md, "Schema 3"
SCHEMA_VERSION = 3

BACKENDS = tuple(b for b in SPEC_BACKENDS if b != "auto")  # what a result can have run on


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
    # a variant of a comparison: its wall timed in turn with the others' (one call of
    # each per round, harness/eager/paired.py); the speedups' figure. None: not paired
    paired_wall_us_median: float | None = None
    paired_wall_us_min: float | None = None
    paired_wall_us_max: float | None = None

    @property
    def has_backward(self) -> bool:
        return self.backward_time_us > 0 or self.recompute_time_us > 0


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
class Edit:
    """A fix written as a precise edit of the user's source (``analysis/fixes/``):
    replace ``[start_line:start_col, end_line:end_col)`` (1-based lines, 0-based
    columns, as Python's ``ast`` counts them) of ``file`` by ``replacement``.
    ``original`` is the text the range held when the edit was built: an edit
    whose range no longer holds it is refused (the file was edited since)."""

    file: str  # workspace-relative, as the result's files are
    start_line: int
    start_col: int
    end_line: int
    end_col: int
    replacement: str = field(metadata={"text": True})  # source text: its lines kept
    original: str = field(metadata={"text": True})
    title: str  # "torch.nn.functional.rms_norm", "AdamW(..., fused=True)": what it changes
    function: str  # the marked function a measurement runs (the result's)


@dataclass
class Finding:
    kind: str  # "dispatches" | "h2d_copy" | "cpu_fallback" | "no_device_time" | "compile_in_steps" | ...
    severity: str  # "error" | "warning" | "info" | "hint"
    file: str
    line: int
    message: str
    # advice that does not claim a speed-up, or one this run measured (the optimizer's)
    fix: str | None = None
    # schema 3, optional: a change named but not measured in this run ("torch.rms_norm"):
    # the message says it is untested; ``trainium-lens fix`` measures it when ``edit`` is set
    candidate: str | None = None
    edit: Edit | None = None  # schema 3, optional: the fix as an edit (docs/fixes.md)


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
    # A job across nodes (``--hosts``, ``--slurm``; docs/nodes.md): the host name of
    # the node that ran this rank, that node's rank in the job and this rank's
    # place on it. Absent (None) for a one-node job.
    node: str | None = None
    node_rank: int | None = None
    local_rank: int | None = None
    # that node's clock minus this machine's when the run began (``--hosts``: measured
    # over SSH, ± half the probe's round trip); None where it was not measured
    clock_offset_ms: float | None = None
    clock_uncertainty_ms: float | None = None


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
class ScriptRun:
    """A ``trainium-lens run`` result: the unmodified command whose steps were
    profiled (``harness/script/``); ``None`` for a marked function."""

    command: list[str] = field(default_factory=list)
    launcher: str = "python"  # "python" | "torchrun"
    steps: list[int] = field(default_factory=list)  # [N, M]: the measured steps asked for
    profiled_steps: list[int] = field(default_factory=list)  # [first, last] recorded (cpu: with twins)
    detector: str = ""  # "optimizer" | "forward" | "step-on": what found the steps
    reference_before: int = 0  # unprofiled steps timed before the window (the reference)
    reference_after: int = 0  # and after it
    # the step's wait for data: a DataLoader's __next__ per step (median over the
    # unprofiled reference steps) and the line that called it (the loop's ``for``)
    data_wait_us: float | None = None
    data_file: str | None = None
    data_line: int | None = None


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
    script: ScriptRun | None = None  # a ``run`` of an unmodified script

    # -- conveniences used by every consumer --------------------------------
    @property
    def per_call_us(self) -> float:
        """The time one call costs in the primary clock, as reconciled against the
        wall: on the cpu clock the ops plus the host time between them (the Python a
        call runs, ``Totals.host_time_us``); on a device clock the kernels alone."""
        host = self.totals.host_time_us if self.clock == "cpu" else None
        return self.totals.self_time_us + (host or 0.0)

    @property
    def unit(self) -> str:
        """What one figure is of: a ``call`` of a marked function, a ``step`` of a script."""
        return "step" if self.script is not None else "call"

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
        result = build(cls, data, "result")
        if result.backend not in BACKENDS:
            raise ResultError(f"result.backend: unknown backend {result.backend!r}")
        # Ids become file names (the store, the artifacts cache): plain names only.
        if not is_run_id(result.run_id):
            raise ResultError(f"result.run_id: not a valid run id: {result.run_id[:80]!r}")
        if result.batch_id and not is_run_id(result.batch_id):
            raise ResultError(f"result.batch_id: not a valid batch id: {result.batch_id[:80]!r}")
        if timestamp(result.created_at) is None:
            raise ResultError(f"result.created_at: not an ISO 8601 timestamp: {result.created_at[:40]!r}")
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


_ISO_DATETIME = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}")


def timestamp(text: object) -> float | None:
    """``created_at`` as seconds since the epoch (UTC when it names no zone), or
    None when it is not an ISO 8601 date and time."""
    if not isinstance(text, str) or len(text) > 40 or not _ISO_DATETIME.match(text):
        return None
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text)
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)  # noqa: UP017 (the harness's Pythons are 3.10)
    try:
        return when.timestamp()
    except (OverflowError, OSError, ValueError):
        return None


def read_regular(path: Path, limit: int) -> bytes:
    """The bytes of ``path`` when it is a regular file (not a link, a FIFO, a
    device: a committed ``runs/x.json -> /dev/stdin`` must not block, one to
    ``/dev/zero`` must not be read forever), at most ``limit`` of them.

    ``lstat`` first (nothing that is not a regular file is even opened), then
    opened without following links and without blocking, checked again on the
    open file (it may have been swapped meanwhile), read in bounded chunks."""
    if not stat_mode.S_ISREG(os.lstat(path).st_mode):
        raise ResultError(f"{path}: not a regular file, not read")
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat_mode.S_ISREG(os.fstat(fd).st_mode):
            raise ResultError(f"{path}: not a regular file, not read")
        chunks: list[bytes] = []
        size = 0
        while True:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                raise ResultError(f"{path}: larger than {limit >> 20} MiB, not read")
    finally:
        os.close(fd)


def load(path: str | Path) -> Result:
    """Read and validate one stored result; ``ResultError`` says what is wrong,
    whatever the damage (unreadable, not a regular file, not UTF-8, not JSON,
    nested past the parser's depth, the wrong shape)."""
    path = Path(path)
    try:
        text = read_regular(path, MAX_RESULT_BYTES).decode("utf-8")
    except OSError as exc:
        raise ResultError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ResultError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    try:
        data = json.loads(text, parse_constant=refuse_constant)
    except json.JSONDecodeError as exc:
        raise ResultError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    except ResultError as exc:
        raise ResultError(f"{path}: {exc}") from None
    except ValueError as exc:  # an integer past the parser's digit limit
        raise ResultError(f"{path}: {' '.join(str(exc).split())[:200]}") from None
    except RecursionError:
        raise ResultError(f"{path}: JSON nested too deeply to be a result") from None
    try:
        return Result.from_dict(data)
    except RecursionError:
        raise ResultError(f"{path}: nested too deeply to be a result") from None


def save(result: Result, path: str | Path) -> Path:
    """Write atomically through the one writer (``model/files.py``): a reader never
    sees half a file, a crash loses nothing, a failed write (a full disk) leaves no
    temporary file behind, and a committed link at a temporary name is never followed."""
    return write_file(path, result.to_json().encode("utf-8"), "the result", own=True, parents=True)

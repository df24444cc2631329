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

Here: ``Result``, ``Batch``, reading and writing them. Their parts are in
``run_info.py`` (what ran, where), ``totals.py``, ``optimizers.py``,
``signals.py``, ``findings.py`` and ``artifacts.py``, beside ``lines.py`` and
``evidence.py``; this module names them all (``__all__``).
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
from trainium_lens.model.artifacts import Artifacts, LineWindows, NeffPair, NeuronView, Window
from trainium_lens.model.codec import ResultError, build, refuse_constant
from trainium_lens.model.evidence import Calibration, Memory, Reconciliation, Roof, Stability, Work
from trainium_lens.model.files import write_file
from trainium_lens.model.findings import Edit, Finding
from trainium_lens.model.fit import Fit
from trainium_lens.model.lines import LineStat, OpStat, Region
from trainium_lens.model.optimizers import OptimizerStat, OptimizerTrial
from trainium_lens.model.paths import is_run_id
from trainium_lens.model.run_info import (
    Environment,
    FunctionRef,
    GitState,
    LibraryFile,
    Output,
    Protocol,
    ScriptRun,
)
from trainium_lens.model.signals import H2DCopy, HostSync, Signals, XlaFallback
from trainium_lens.model.totals import Bucket, RankRun, Totals

# The document's parts live in modules of their own; importers name them from here.
__all__ = [
    "BACKENDS",
    "MAX_RESULT_BYTES",
    "SCHEMA_VERSION",
    "Artifacts",
    "Batch",
    "Bucket",
    "Edit",
    "Environment",
    "Finding",
    "FunctionRef",
    "GitState",
    "H2DCopy",
    "HostSync",
    "LibraryFile",
    "LineWindows",
    "NeffPair",
    "NeuronView",
    "OptimizerStat",
    "OptimizerTrial",
    "Output",
    "Protocol",
    "RankRun",
    "Result",
    "ScriptRun",
    "Signals",
    "Totals",
    "Window",
    "XlaFallback",
    "load",
    "read_regular",
    "save",
    "timestamp",
]

# 2: backward/recompute per line, totals split, optimizers
# 3: optional fields only (a schema-2 file loads unchanged): docs/protocol.md, "Schema 3"
SCHEMA_VERSION = 3

BACKENDS = tuple(b for b in SPEC_BACKENDS if b != "auto")  # what a result can have run on


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
    fit: Fit | None = None  # cpu clock: what the figures took from the unprofiled wall (model/fit.py)
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


#: A stored result larger than this is not read (a real one with a thousand
#: lines is a few MB; a committed 200 MB one must not take the editor's memory
#: nor stall the language server: its size is checked before it is opened).
MAX_RESULT_BYTES = 64 * 1024 * 1024


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

    ``lstat`` first (nothing that is not a regular file, nor one over the
    limit, is even opened), then opened without following links and without
    blocking, checked again on the open file (it may have been swapped
    meanwhile), read in bounded chunks."""
    st = os.lstat(path)
    if not stat_mode.S_ISREG(st.st_mode):
        raise ResultError(f"{path}: not a regular file, not read")
    if st.st_size > limit:
        raise ResultError(f"{path}: larger than {limit >> 20} MiB ({st.st_size >> 20} MiB), not read")
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

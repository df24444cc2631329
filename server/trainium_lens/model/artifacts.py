"""Where a run's files are (its trace, its device profile and the views of it) and
each line's windows on the trace's clock. Parts of the result document
(``model/result.py``)."""

from __future__ import annotations

from dataclasses import dataclass, field


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

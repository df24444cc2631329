"""What the harness observed that the analysis turns into findings: host-to-device
copies, xla's host syncs and CPU fallbacks, compiles, warnings (``Signals``).
Parts of the result document (``model/result.py``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from trainium_lens.model.lines import SourceLine


@dataclass
class H2DCopy:
    """A line whose calls copied host→device (a CPU tensor fed into a device op)."""

    file: str
    line: int
    calls: float
    self_time_us: float = 0.0


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

"""Backends: which profiler activities, which synchronize, which clock.

| backend | activities            | sync                      | primary clock        |
| neuron  | CPU + PrivateUse1     | torch.neuron.synchronize  | device (PrivateUse1) |
| cuda    | CPU + CUDA            | torch.cuda.synchronize    | device (CUDA)        |
| cpu     | CPU                   | none                      | CPU self time        |

The Neuron specifics live in ``neuron.py`` alone.
"""

from __future__ import annotations

import platform
from typing import Any

from .events import HarnessError


class Backend:
    name = "cpu"
    device = "cpu"
    device_clock = False  # True: the primary clock is device time (kernels)

    def __init__(self, torch: Any):
        self.torch = torch
        self.notes: list[str] = []  # said once as warnings (e.g. why not neuron)
        self.neuron_flavour: str | None = None

    def activities(self) -> list:
        return [self.torch.profiler.ProfilerActivity.CPU]

    def sync(self) -> None:
        pass

    def profiler_kwargs(self, run_dir: str, run_id: str) -> dict:
        """Extra ``torch.profiler.profile`` arguments (Neuron: its config)."""
        return {}

    def start_capture(self) -> None:
        """Begin collecting backend messages (Neuron: CPU-fallback warnings)."""

    def stop_capture(self) -> dict:
        """Signals collected since ``start_capture`` (merged into ``signals``)."""
        return {}

    def artifacts(self, run_dir: str) -> dict:
        return {}

    def environment(self) -> dict:
        return {
            "python": platform.python_version(),
            "torch": getattr(self.torch, "__version__", ""),
            "platform": f"{platform.system()}-{platform.machine()}",
            "instance_type": instance_type(),
            "device_name": platform.processor() or platform.machine(),
            "neuron_flavour": self.neuron_flavour,
        }


class CudaBackend(Backend):
    name = "cuda"
    device = "cuda"
    device_clock = True

    def activities(self) -> list:
        pa = self.torch.profiler.ProfilerActivity
        return [pa.CPU, pa.CUDA]

    def sync(self) -> None:
        self.torch.cuda.synchronize()

    def environment(self) -> dict:
        env = super().environment()
        env["device_name"] = self.torch.cuda.get_device_name(0)
        return env


def instance_type() -> str | None:
    """EC2 instance type from DMI (no network): e.g. ``trn1.2xlarge``."""
    try:
        with open("/sys/devices/virtual/dmi/id/product_name", encoding="utf-8") as fh:
            name = fh.read().strip()
    except OSError:
        return None
    return name if "." in name else None


def choose(torch: Any, requested: str) -> Backend:
    from . import neuron

    notes = []
    if requested in ("auto", "neuron"):
        reason = neuron.unavailable_reason(torch)
        if reason is None:
            return neuron.NeuronBackend(torch)
        if requested == "neuron":
            raise HarnessError("backend_unavailable", f"backend neuron is not available here: {reason}")
        if "not installed" not in reason:  # torch-neuronx is here but cannot profile
            notes.append(f"not profiling on Neuron: {reason}")
    backend: Backend | None = None
    if requested in ("auto", "cuda"):
        if torch.cuda.is_available():
            backend = CudaBackend(torch)
        elif requested == "cuda":
            raise HarnessError("backend_unavailable",
                               "backend cuda is not available here: torch.cuda.is_available() is "
                               f"False (torch {torch.__version__})")
    backend = backend or Backend(torch)
    backend.notes = notes
    if notes:
        backend.neuron_flavour = neuron.flavour(torch)
    return backend


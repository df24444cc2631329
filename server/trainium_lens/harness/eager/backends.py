"""Backends: which profiler activities, which synchronize, which clock.

| backend | activities            | sync                      | primary clock        |
| neuron  | CPU + PrivateUse1     | torch.neuron.synchronize  | device (PrivateUse1) |
| cuda    | CPU + CUDA            | torch.cuda.synchronize    | device (CUDA)        |
| cpu     | CPU                   | none                      | CPU self time        |
| xla     | (torch_xla profiler)  | torch_xla.sync + wait     | host thunk time (CPU) or device |

The Neuron specifics live in ``neuron.py``, torch-xla's in ``xla.py``; which
backend a run gets is decided in ``runtime/choose.py`` (it imports them all; this
module imports none of them, so there is no cycle).
"""

from __future__ import annotations

import platform
from typing import Any


class Backend:
    """What every backend shares; ``CpuBackend`` is the plain one."""

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

    # True: when the profiler reports no device time, ``device_views`` still gets
    # device time from the backend's own device profile (Neuron)
    device_profile = False

    def device_views(self, run_dir: str, run_id: str, steps: int) -> dict:
        """Artifacts (``neuron_views``) the core reads per-line device time from."""
        return {}

    def device_span(self, call: Any, calls: int) -> list[float] | None:
        """Device-side elapsed time of ``calls`` unprofiled calls, µs each (the
        reference a device clock is reconciled against); None: no such timer."""
        return None

    def environment(self) -> dict:
        return {
            "python": platform.python_version(),
            "torch": getattr(self.torch, "__version__", ""),
            "platform": f"{platform.system()}-{platform.machine()}",
            "instance_type": instance_type(),
            "device_name": platform.processor() or platform.machine(),
            "neuron_flavour": self.neuron_flavour,
        }


class CpuBackend(Backend):
    name = "cpu"
    device = "cpu"


class CudaBackend(Backend):
    name = "cuda"
    device = "cuda"
    device_clock = True

    def activities(self) -> list:
        pa = self.torch.profiler.ProfilerActivity
        return [pa.CPU, pa.CUDA]

    def sync(self) -> None:
        self.torch.cuda.synchronize()

    def device_span(self, call: Any, calls: int) -> list[float] | None:
        """CUDA events around each call: kernels plus the device's idle gaps
        between them, without the profiler (the kernel sum can only be less)."""
        cuda = self.torch.cuda
        out = []
        for _ in range(calls):
            start, end = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
            start.record()
            call()
            end.record()
            end.synchronize()
            out.append(start.elapsed_time(end) * 1000.0)  # ms → µs
        return out

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

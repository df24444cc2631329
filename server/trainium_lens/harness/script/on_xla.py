"""A torch-xla script run without ``--backend xla``: recognised at its first step.

On torch.profiler's CPU clock a torch-xla step only *traces* lazy tensors: its
graph runs later, at the script's sync, outside every op the profiler sees. So the
figures would be the tracing's (a 369 ms "wall" against 14 ms real, lines at 1034 %
of the peak, reported on nanoGPT's loop): wrong, with nothing to say so. Switching
to the xla backend there is too late: it needs ``XLA_IR_DEBUG``/``XLA_HLO_DEBUG``
set before ``torch_xla`` is imported and the backward tags on from the first
compile (docs/xla.md), and the backend is chosen at ``import torch``, before the
script imports torch_xla. So the run stops profiling with the hint and the script
runs to its end unprofiled (``session.py``: the ``aside`` event).
"""

from __future__ import annotations

import sys
from typing import Any

HINT = "this script runs on torch-xla: use --backend xla"


def _devices(detector: Any) -> set[str]:
    """The device types of the step's tensors: the counted optimizer's parameters, or
    the last outermost forward's output."""
    found: set[str] = set()
    opt = detector.counted
    for group in getattr(opt, "param_groups", None) or []:
        for p in group.get("params", []):
            found.add(getattr(getattr(p, "device", None), "type", ""))
    if not found and detector.output_device:
        found.add(detector.output_device)
    return found


def runs_on_xla(detector: Any) -> bool:
    """torch_xla imported and the step's tensors on an xla device."""
    return "torch_xla" in sys.modules and "xla" in _devices(detector)

"""Which backend a run gets: ``choose(torch, requested)``.

The one module that knows every backend (``backends.py`` holds the plain CPU
and CUDA ones, ``neuron.py`` TorchNeuron, ``xla.py`` torch-xla): each of them
imports only ``backends``, so there is no import cycle.

``auto`` picks, in order: native TorchNeuron (Trn2/Trn3), the XLA flavour of
torch-neuronx (Trn1: backend ``xla``), CUDA, CPU.
"""

from __future__ import annotations

from typing import Any

from trainium_lens.harness.eager import neuron
from trainium_lens.harness.eager.backends import Backend, CpuBackend, CudaBackend
from trainium_lens.harness.events import HarnessError
from trainium_lens.harness.xla import backend as xla


def choose(torch: Any, requested: str) -> Backend:
    notes = []
    if requested == "xla":
        reason = xla.unavailable_reason()
        if reason is not None:
            raise HarnessError("backend_unavailable", f"backend xla is not available here: {reason}")
        return xla.XlaBackend(torch)
    if requested in ("auto", "neuron"):
        reason = neuron.unavailable_reason(torch)
        if reason is None:
            return neuron.NeuronBackend(torch)
        if requested == "neuron":
            raise HarnessError("backend_unavailable", f"backend neuron is not available here: {reason}")
        if neuron.flavour(torch) == "xla" and xla.unavailable_reason() is None:
            # Trn1: torch-neuronx on torch-xla; time comes from HLO metadata (xla.py)
            trn1 = xla.XlaBackend(torch)
            trn1.neuron_flavour = "xla"
            return trn1
        if "not installed" not in reason:  # torch-neuronx is here but cannot profile
            notes.append(f"not profiling on Neuron: {reason}")
    backend: Backend | None = None
    if requested in ("auto", "cuda"):
        if torch.cuda.is_available():
            backend = CudaBackend(torch)
        elif requested == "cuda":
            raise HarnessError(
                "backend_unavailable",
                "backend cuda is not available here: torch.cuda.is_available() is "
                f"False (torch {torch.__version__})",
            )
    backend = backend or CpuBackend(torch)
    backend.notes = notes
    if notes:
        backend.neuron_flavour = neuron.flavour(torch)
    return backend

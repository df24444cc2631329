"""Everything Neuron-specific, written against the documented TorchNeuron API.

Reference: docs/neuron.md (AWS Neuron SDK docs, releases 2.31–2.33).
No Trainium host is reachable where this was written, so each call below says
which documented fact it relies on, and optional arguments are passed only
when the installed signature names them. The pure helpers at the top
(``accepted_kwargs``, ``pair_neff_ntff``, ``fallback_ops``) are unit-tested
with a stand-in module.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import logging
import os
import re
import shutil
import sys
import warnings
from collections.abc import Callable, Mapping
from typing import Any

from trainium_lens.harness.eager.backends import Backend
from trainium_lens.harness.eager.neuron_view import view_session

# The runtime logs this once per op that fell back, at WARNING (docs/neuron.md, "CPU fallback").
FALLBACK_RE = re.compile(r"Operator '([^']+)' fell back to CPU")
# A NEFF and its NTFFs share a number (docs/neuron.md, "NEFF ↔ NTFF").
NEFF_RE = re.compile(r"^neff_(\d+)(?:_vnc_\d+)?\.neff$")
NTFF_RE = re.compile(r"^(\d+)_.*\.ntff$")
# Set, it conflicts with torch.profiler (docs/neuron.md, "No NEURON_RT_INSPECT_ENABLE=1").
INSPECT_ENV = "NEURON_RT_INSPECT_ENABLE"
# The NEFF cache TorchNeuron compiles into (default /tmp/neff_cache); NeuronConfig's
# neff_cache_dir copies the run's NEFFs from it into the profile folder, where
# neuron-explorer pairs them with the session NTFF (docs/neuron.md, "Capture")
NEFF_CACHE_ENV, NEFF_CACHE_DEFAULT = "TORCH_NEURONX_NEFF_CACHE_DIR", "/tmp/neff_cache"
OPTIONAL = ("correlate_device_time", "neff_cache_dir")
DROPPED_NOTE = {
    "correlate_device_time": "key_averages() may lack device time (then the device profile is read)",
    "neff_cache_dir": "the profile folder may lack the NEFFs neuron-explorer needs",
}


# -- before torch loads ----------------------------------------------------------


def prepare_env() -> None:
    """TorchNeuron compiles each NEFF with the Python stack only when
    NEURON_FRAMEWORK_DEBUG=1 is set before compiling (docs/neuron.md): the device
    profile's instructions then name stack frames, which is how they reach lines."""
    os.environ.setdefault("NEURON_FRAMEWORK_DEBUG", "1")


# -- pure helpers -------------------------------------------------------------


def accepted_kwargs(fn: Callable[..., Any], wanted: dict, optional: tuple[str, ...]) -> tuple[dict, list]:
    """Keep ``optional`` keys only if ``fn``'s signature names them.

    ``correlate_device_time`` is in a tutorial, not in the API reference, so it is
    passed only when the installed signature names it (docs/neuron.md).
    A ``**kwargs`` catch-all does not count as accepting: the C++ side may still
    reject an unknown key. Returns (kwargs to pass, dropped keys).
    """
    params: Mapping[str, Any]
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        params = {}
    passed, dropped = {}, []
    for key, value in wanted.items():
        if key in optional and key not in params:
            dropped.append(key)
        else:
            passed[key] = value
    return passed, dropped


def pair_neff_ntff(paths: list[str]) -> list[dict]:
    """Pair NEFFs and NTFFs by their numeric hash (docs/neuron.md: 1:1 is not guaranteed,
    so an unmatched file is listed with ``None`` on the other side)."""
    neffs: dict[str, str] = {}
    ntffs: dict[str, list[str | None]] = {}
    for path in sorted(paths):
        base = os.path.basename(path)
        m = NEFF_RE.match(base)
        if m:
            neffs.setdefault(m.group(1), path)
            continue
        m = NTFF_RE.match(base)
        if m:
            ntffs.setdefault(m.group(1), []).append(path)
    pairs: list[dict[str, Any]] = []
    for key in sorted(set(neffs) | set(ntffs)):
        for ntff in ntffs.get(key) or [None]:
            pairs.append({"neff": neffs.get(key), "ntff": ntff})
    return pairs


def fallback_ops(messages: list[str]) -> list[str]:
    """Op names from captured CPU-fallback messages, first-seen order, no repeats."""
    seen: list[str] = []
    for message in messages:
        for op in FALLBACK_RE.findall(message):
            if op not in seen:
                seen.append(op)
    return seen


def inspect_clash(environ: dict) -> bool:
    return str(environ.get(INSPECT_ENV, "")).strip().lower() in ("1", "true", "yes", "on")


# -- detection -----------------------------------------------------------------


def flavour(torch: Any) -> str | None:
    """ "native" (TorchNeuron: device ``neuron`` through PrivateUse1), "xla" (the
    older torch-neuronx on Trn1, built on torch-xla), or None (not installed)."""
    if importlib.util.find_spec("torch_neuronx") is None:
        return None
    try:
        importlib.import_module("torch_neuronx")
    except Exception:
        return None
    # TorchNeuron registers the device `neuron` as PrivateUse1 (docs/neuron.md).
    try:
        if torch._C._get_privateuse1_backend_name() == "neuron":
            return "native"
    except AttributeError:
        pass
    if "torch_xla" in sys.modules or importlib.util.find_spec("torch_xla") is not None:
        return "xla"
    return None


def unavailable_reason(torch: Any) -> str | None:
    """None when the native Neuron backend can profile here, else why not."""
    if importlib.util.find_spec("torch_neuronx") is None:
        return "torch_neuronx is not installed (it ships with the Neuron DLAMI / AWS pip index)"
    kind = flavour(torch)
    if kind == "xla":
        return (
            "torch-neuronx here is the XLA flavour (Trn1); per-op device profiling with "
            "torch.profiler needs TorchNeuron (Trn2/Trn3); here use --backend xla (HLO-level time)"
        )
    if kind != "native":
        return "torch_neuronx imported but registered no 'neuron' device"
    mod = getattr(torch, "neuron", None)
    try:
        if mod is None or not mod.is_available():
            return "torch.neuron reports no Neuron device (check neuron-ls and NEURON_RT_VISIBLE_CORES)"
    except Exception as exc:  # a runtime that cannot start
        return f"torch.neuron.is_available() failed: {exc}"
    return None


# -- the backend ------------------------------------------------------------------


class _Capture(logging.Handler):
    def __init__(self, sink: list[str]):
        super().__init__(level=logging.WARNING)
        self.sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.sink.append(record.getMessage())
        except Exception:
            pass


class NeuronBackend(Backend):
    name = "neuron"
    device = "neuron"
    device_clock = True
    device_profile = True  # no device time in key_averages(): read the session profile

    def __init__(self, torch: Any):
        super().__init__(torch)
        self.profile_dir: str | None = None
        self.messages: list[str] = []
        self.dropped: list[str] = []
        self._handler: _Capture | None = None
        self._showwarning: Any = None

    def activities(self) -> list:
        # Both are needed to correlate ops with device time (docs/neuron.md, "Both activities").
        pa = self.torch.profiler.ProfilerActivity
        return [pa.CPU, pa.PrivateUse1]

    def sync(self) -> None:
        # Before each prof.step(): else the trace may be exported before the device
        # finishes and the device column is empty (docs/neuron.md, "Synchronize each step").
        self.torch.neuron.synchronize()

    def profiler_kwargs(self, run_dir: str, run_id: str) -> dict:
        # The documented profiling API (docs/neuron.md, "The profiling API").
        from torch_neuronx.profiling import NeuronConfig, NeuronProfiler, ProfileMode

        self.profile_dir = os.path.join(run_dir, f"{run_id}.neuron")
        os.makedirs(self.profile_dir, exist_ok=True)
        wanted = {
            # Device + runtime profiles of core 0 into the run's folder (docs/neuron.md).
            "modes": [ProfileMode.DEVICE, ProfileMode.RUNTIME],
            "profile_output_dir": self.profile_dir,
            "capture_enabled_for_nc": os.environ.get("TRAINIUM_LENS_CAPTURE_NC", "0"),
            "correlate_device_time": True,
            "neff_cache_dir": os.environ.get(NEFF_CACHE_ENV, NEFF_CACHE_DEFAULT),
        }
        kwargs, self.dropped = accepted_kwargs(NeuronConfig, wanted, OPTIONAL)
        config = NeuronConfig(**kwargs)
        # How the profiler takes the config (docs/neuron.md, "The profiling API").
        return {"experimental_config": config, "on_trace_ready": NeuronProfiler(config).export_trace}

    def start_capture(self) -> None:
        self.messages = []
        self._handler = _Capture(self.messages)
        logging.getLogger().addHandler(self._handler)
        self._showwarning = warnings.showwarning

        def show(message, category, filename, lineno, file=None, line=None):
            self.messages.append(str(message))

        warnings.showwarning = show

    def stop_capture(self) -> dict:
        if self._handler is not None:
            logging.getLogger().removeHandler(self._handler)
            self._handler = None
        if self._showwarning is not None:
            warnings.showwarning = self._showwarning
            self._showwarning = None
        ops = fallback_ops(self.messages)
        notes = [f"NeuronConfig here does not take {k}: {DROPPED_NOTE.get(k, '')}" for k in self.dropped]
        clash = inspect_clash(dict(os.environ))
        if clash:
            notes.append(
                f"{INSPECT_ENV}=1 is set: it conflicts with torch.profiler on Neuron (unset it for profiling)"
            )
        return {
            "cpu_fallback_ops": ops,
            "neuron_rt_inspect_clash": clash,
            "warnings": notes + [m for m in self.messages if FALLBACK_RE.search(m)],
        }

    def artifacts(self, run_dir: str) -> dict:
        # One folder per process, NEFFs and NTFFs inside (docs/neuron.md, "What a run writes").
        return {"neuron_profile_dir": self.profile_dir, "neff_ntff": pair_neff_ntff(_files(self.profile_dir))}

    def device_views(self, run_dir: str, run_id: str, steps: int) -> dict:
        """key_averages() carried no device time: process the device profile this run's
        NeuronConfig wrote (DEVICE mode: a session NTFF holding every execution of the
        profiled steps) with neuron-explorer; the core reads it per line
        (engine/device_profile.py) through the same reader as Trn1."""
        folder = self.profile_dir or ""
        ntffs = [p for p in _files(folder) if p.endswith(".ntff")]
        error = None
        if not ntffs:
            error = f"NeuronConfig wrote no device trace (NTFF) under {folder}"
        elif all(os.path.getsize(p) == 0 for p in ntffs):
            # An empty NTFF: profiling was on but no execution was captured (docs/neuron.md, "Capture").
            error = f"the device traces under {folder} are empty: no execution was captured"
        if error:
            view = {"neff": None, "ntff": folder, "parquet": None, "error": error}
            return {"neuron_views": [{**view, "mode": "session", "steps": steps}]}
        dest = os.path.join(run_dir, f"{run_id}.neuron-view")
        view = view_session(folder, dest, steps)
        carry_mappings(folder, view.get("parquet"))
        return {"neuron_views": [view]}

    def environment(self) -> dict:
        env = super().environment()
        try:
            import torch_neuronx

            env["torch_neuronx"] = getattr(torch_neuronx, "__version__", None)
        except Exception:
            pass
        env["neuron_flavour"] = "native"
        try:
            env["neuron_cores"] = int(self.torch.neuron.device_count())
        except Exception:
            pass
        env["device_name"] = "neuron"
        return env


def carry_mappings(folder: str, dest: str | None) -> list[str]:
    """TorchNeuron's op maps (``framework_mapping_<ts>.json``, written beside its traces
    when runtime and PyTorch profiling run together: docs/neuron.md, "The exact join")
    copied into the processed view, so they travel with it to where the core reads it."""
    if not dest or not os.path.isdir(dest) or not os.path.isdir(folder):
        return []
    copied = []
    for where, _dirs, names in os.walk(folder):
        for name in sorted(names):
            if name.startswith("framework_mapping_") and name.endswith(".json"):
                # one folder per process: its maps keep their folder and name
                into = os.path.join(dest, "framework_mapping", os.path.relpath(where, folder))
                os.makedirs(into, exist_ok=True)
                target = os.path.join(into, name)
                shutil.copyfile(os.path.join(where, name), target)
                copied.append(target)
    return copied


def _files(root: str | None) -> list[str]:
    """The NEFFs and NTFFs under a profile folder."""
    found: list[str] = []
    if root and os.path.isdir(root):
        for folder, _dirs, names in os.walk(root):
            found.extend(os.path.join(folder, n) for n in sorted(names) if n.endswith((".neff", ".ntff")))
    return sorted(found)

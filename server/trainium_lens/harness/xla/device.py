"""Trn1 device capture for backend ``xla``, on the host (stdlib only).

Written against the Neuron docs (docs/neuron.md); not run on Trainium hardware.

1. ``capture_env``: the Neuron runtime's own capture, **model** mode with a
   warm-up count, so each NEFF (compiled graph) is profiled on exactly one
   execution: the first measured step (``2 + wait + warmup`` executions of a
   step's graph come before it: the two compiling calls, then the unwatched
   steps). One NTFF per NEFF is then one step's device time, whatever else ran.
2. ``pair``: NTFFs to the NEFFs they executed. The runtime names them
   ``neff_<hash>[...].neff`` and ``<hash>_instid_<i>_vnc_<core>.ntff``; an NTFF
   named otherwise pairs with the NEFF when that is alone in its folder.
3. ``neuron_view.view_pairs`` (shared with TorchNeuron's session profile):
   ``neuron-explorer view -n X.neff -s Y.ntff --output-file DIR`` per pair (DIR
   gets the Parquet tables); a missing binary or a failed view is one line in that
   pair's ``error``, never an exception: the run keeps its host figures. The core
   side (``trainium_lens.engine.device_profile``) reads the folders.
"""

from __future__ import annotations

import os
import re
from typing import Any

from trainium_lens.harness.eager.neuron_view import view_pairs

# Calls of the step's graph before the first measured step, beside wait + warmup
# (xla.profile_function: the first call, then one more, each synced).
COMPILE_CALLS = 2
_NEFF_HASH = re.compile(r"(\d{4,})")
_NTFF_HASH = re.compile(r"^(\d{4,})_")
_CORE = re.compile(r"vnc_(\d+)")


def capture_env(run_dir: str, protocol: dict) -> dict[str, str]:
    skip = COMPILE_CALLS + int(protocol.get("wait", 0)) + int(protocol.get("warmup", 0))
    return {
        "NEURON_RT_INSPECT_ENABLE": "1",
        "NEURON_RT_INSPECT_DEVICE_PROFILE": "model",
        "NEURON_RT_INSPECT_DEVICE_PROFILE_NUM_WARMUP": str(skip),
        "NEURON_RT_INSPECT_OUTPUT_DIR": os.path.join(os.path.abspath(run_dir), "neuron-inspect"),
    }


def files(folder: str | None, suffix: str) -> list[str]:
    out: list[str] = []
    if folder and os.path.isdir(folder):
        for where, _dirs, names in os.walk(folder):
            out.extend(os.path.join(where, n) for n in sorted(names) if n.endswith(suffix))
    return sorted(out)


def pair(neffs: list[str], ntffs: list[str]) -> list[dict[str, Any]]:
    """One entry per NTFF: ``{"neff", "ntff", "error"}``. With one NTFF per core of
    the same NEFF, only the lowest core's is kept (one execution = one step)."""
    by_hash: dict[str, str] = {}
    by_folder: dict[str, list[str]] = {}
    for path in neffs:
        found = _NEFF_HASH.search(os.path.basename(path))
        if found:
            by_hash.setdefault(found.group(1), path)
        by_folder.setdefault(os.path.dirname(path), []).append(path)
    out, seen = [], set()
    for ntff in sorted(ntffs, key=lambda p: (os.path.dirname(p), _core(p), p)):
        m = _NTFF_HASH.match(os.path.basename(ntff))
        neff: str | None = by_hash.get(m.group(1)) if m else None
        if m is None and len(by_folder.get(os.path.dirname(ntff), [])) == 1:
            neff = by_folder[os.path.dirname(ntff)][0]
        if neff is None:
            out.append(
                {
                    "neff": None,
                    "ntff": ntff,
                    "error": "no NEFF pairs with this NTFF "
                    "(neither by the runtime's hash nor alone in its folder)",
                }
            )
        elif neff not in seen:
            seen.add(neff)
            out.append({"neff": neff, "ntff": ntff, "error": None})
    return out


def _core(path: str) -> int:
    m = _CORE.search(os.path.basename(path))
    return int(m.group(1)) if m else 0


class DeviceCapture:
    """The capture of one harness process: which NTFFs each function added, and
    which execution they hold.

    ``NEURON_RT_INSPECT_DEVICE_PROFILE_NUM_WARMUP`` is documented from SDK 2.33; an
    older runtime ignores it and captures each NEFF's *first* execution, the cold
    one in the compiling calls. ``before_measured`` (called just before the measured
    steps) notes the NTFFs already written by then: such a capture is of that first
    execution (mode ``model-first``), and the result says so. An NTFF written only
    later is taken to be the first measured step (mode ``model``)."""

    def __init__(self, inspect_dir: str, compile_cache: str | None) -> None:
        self.inspect_dir = inspect_dir
        self.compile_cache = compile_cache
        self.done: set[str] = set()
        self.early: set[str] = set()

    def mark(self) -> None:
        """Before a function runs: what is there already belongs to earlier functions."""
        self.done.update(files(self.inspect_dir, ".ntff"))

    def before_measured(self) -> None:
        self.early = {t for t in files(self.inspect_dir, ".ntff") if t not in self.done}

    def process(self, out_root: str) -> list[dict]:
        new = [t for t in files(self.inspect_dir, ".ntff") if t not in self.done]
        self.done.update(new)
        if not new:
            return []
        neffs = files(self.inspect_dir, ".neff") + files(self.compile_cache, ".neff")
        views = view_pairs(pair(neffs, new), out_root)
        for view in views:
            if view["ntff"] in self.early:
                view["mode"] = "model-first"
        return views

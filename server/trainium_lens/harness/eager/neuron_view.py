"""``neuron-explorer view`` on the host (stdlib only): a captured device profile →
the Parquet tables the core reads (``trainium_lens.engine.device_profile``), the
same for both flavours (docs/neuron.md, "Capture and processing"):

* ``view_pairs``: one NEFF/NTFF pair per call, ``view -n X.neff -s Y.ntff
  --output-file DIR`` (Trn1: the runtime's model-mode capture, one execution per
  NEFF);
* ``view_session``: a TorchNeuron profile folder (NeuronConfig's
  ``profile_output_dir``: NEFFs and ``profile_nc_<n>_session_<k>.ntff``), ``view
  --session-dir DIR --output-file OUT``; Explorer pairs the NTFF with its NEFFs.

Each entry comes back with ``parquet`` (the output, a folder of tables or, where
an SDK writes JSON there, a file) or a one-line ``error`` (a missing binary, a
failed or timed-out view): never an exception, so the run keeps its host figures.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import Any

DEFAULT_BINARY = "/opt/aws/neuron/bin/neuron-explorer"
VIEW_TIMEOUT_S = 1800.0  # large NTFFs take many minutes to process (docs)


def find_binary() -> str | None:
    found = shutil.which("neuron-explorer")
    if found:
        return found
    return DEFAULT_BINARY if os.access(DEFAULT_BINARY, os.X_OK) else None


def run_view(args: list[str], dest: str, timeout: float = VIEW_TIMEOUT_S) -> tuple[str | None, str | None]:
    """``neuron-explorer view ARGS --output-file DEST`` → (output path, None) or (None, why)."""
    exe = find_binary()
    if exe is None:
        return None, (
            f"neuron-explorer is not installed on this host (not on PATH, not {DEFAULT_BINARY}): "
            f"install aws-neuronx-tools"
        )
    argv = [exe, "view", *args, "--output-file", dest]
    os.makedirs(os.path.dirname(dest) or ".", exist_ok=True)  # the tool makes dest itself
    try:
        proc = subprocess.run(argv, capture_output=True, stdin=subprocess.DEVNULL, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"neuron-explorer view did not finish in {timeout:.0f} s"
    except OSError as exc:
        return None, f"cannot run {exe}: {exc.strerror or exc}"
    if proc.returncode != 0:
        last = [ln for ln in proc.stderr.decode("utf-8", "replace").splitlines() if ln.strip()]
        return (
            None,
            f"neuron-explorer view failed (exit {proc.returncode}): {(last[-1] if last else '')[:200]}",
        )
    if not os.path.exists(dest):
        return None, f"neuron-explorer view wrote nothing at {dest}"
    return dest, None


def view_pairs(pairs: list[dict[str, Any]], out_root: str, timeout: float = VIEW_TIMEOUT_S) -> list[dict]:
    """Each NEFF/NTFF pair processed on its own (model mode: one execution, one step)."""
    out = []
    for k, p in enumerate(pairs):
        entry = {
            "neff": p["neff"],
            "ntff": p["ntff"],
            "parquet": None,
            "error": p.get("error"),
            "mode": "model",
            "steps": 1,
        }
        out.append(entry)
        if entry["error"]:
            continue
        stem = os.path.splitext(os.path.basename(p["ntff"]))[0]
        dest = os.path.join(out_root, f"{k}-{stem}")
        entry["parquet"], entry["error"] = run_view(["-n", p["neff"], "-s", p["ntff"]], dest, timeout)
    return out


def view_session(folder: str, dest: str, steps: int, timeout: float = VIEW_TIMEOUT_S) -> dict:
    """A TorchNeuron profile folder processed whole: every execution of ``steps`` steps."""
    parquet, error = run_view(["--session-dir", folder], dest, timeout)
    return {
        "neff": None,
        "ntff": folder,
        "parquet": parquet,
        "error": error,
        "mode": "session",
        "steps": steps,
    }

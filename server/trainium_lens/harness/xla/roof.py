"""The roof an xla-cpu run is measured against, and the lines that read above it.

A line's FLOPs are exact counts from its executed HLO instructions' shapes
(``xla/work.py``) and its time is those same instructions' (``xla/attribution.py``,
the untraced work of asynchronous ones included: ``xla/async_work.py``). So a line
above the FLOP/s peak means one of two measures is off, and the run says which:

* the roof: measured while other processes held the CPU (a two-thread matmul
  stalls on OpenMP's barriers on a loaded host). A line faster than the cached
  roof sends it to be measured again (``calibrate.cpu_roof``: each figure keeps
  the best of both), as the eager CPU backend does;
* the time: still above a roof measured on a quiet host, the line's
  instructions' traced time missed part of their work.
"""

from __future__ import annotations

import os
from typing import Any

from trainium_lens.harness.xla.figures import line_phases


def achieved(lines: list[dict]) -> dict:
    """The fastest FLOP/s per dtype the lines reached, forward or backward (median time)."""
    flops: dict[str, float] = {}
    for line in lines:
        dtype = line.get("dtype")
        for f, t in line_phases(line):
            if dtype and f and t > 0:
                flops[dtype] = max(flops.get(dtype, 0.0), f / (t * 1e-6))
    return {"flops": flops, "bytes_per_s": 0.0}  # bytes are an estimate: never the roof's fault


def cpu_roof(backend: Any, lines: list[dict]) -> dict | None:
    """On torch-xla's CPU device the instructions run on this host's CPU: its measured
    roof, with as many threads as XLA's CPU runtime uses. Its Eigen pool takes every
    CPU this process may run on, whatever torch's own thread count (the harness runs
    with OMP_NUM_THREADS=1 on busy hosts): a roof of torch's one thread is too low for
    an instruction that ran on every core (docs/xla.md)."""
    if backend.device_type.upper() != "CPU":
        return None
    from trainium_lens.harness.work.calibrate import best_of
    from trainium_lens.harness.work.calibrate import cpu_roof as measured

    torch = backend.torch
    fast = achieved(lines)
    threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    before = torch.get_num_threads()
    roof = measured(torch, fast)
    if threads > before:
        # more threads never lower the peak: the one-thread roof is a floor for a busy
        # moment (OpenMP's barriers stall on a loaded host and read a fraction of it)
        torch.set_num_threads(threads)
        try:
            roof = best_of(roof, measured(torch, fast))
        finally:
            torch.set_num_threads(before)
    roof["source"] += (
        f" (torch's CPU kernels on {threads} threads, as many as XLA's CPU runtime uses: "
        f"it runs its own kernels, a roof of the same host)"
    )
    return roof


def above(lines: list[dict], roof: dict | None) -> list[str]:
    """One warning per line and phase still above the FLOP/s peak, naming the measure that is off."""
    if not roof:
        return []
    peaks = {p["dtype"]: p["flops_per_s"] for p in roof.get("flops", [])}
    out = []
    for line in lines:
        peak = peaks.get(line.get("dtype") or "float32") or peaks.get("float32")
        for phase, (f, t) in zip(("forward", "backward"), line_phases(line), strict=True):
            if not (peak and f and t > 0) or f / (t * 1e-6) <= peak:
                continue
            pct = 100 * f / (t * 1e-6) / peak
            off = (
                "the roof: measured while other processes held the CPU (delete cpu-roof.json in the "
                "cache folder to measure it again on a quiet host)"
                if roof.get("busy")
                else "the time: the line's instructions' traced time missed part of their work"
            )
            out.append(
                f"{line['file']}:{line['line']} {phase} reads {pct:.0f}% of the FLOP/s peak: its FLOPs "
                f"are exact counts of its HLO instructions, so the measure that is off is {off}"
            )
    return out

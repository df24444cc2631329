"""This host's CPU roof, measured: a short matmul per dtype and a large copy,
once per host (cached by CPU model, thread count and torch version).

A CPU has no datasheet figure that torch reaches: the peak depends on the
vector units, the BLAS torch was built with, and the threads it may use. So the
roof is what torch itself reaches here, measured the same way each time:

* FLOP/s per dtype (float32, bfloat16): the best of several ``a @ b`` of square
  matrices, sized so one product takes at least ~20 ms (2·n³ FLOPs each);
* bytes/s: the best of several ``dst.copy_(src)`` of 64 MiB (read + write, so
  128 MiB moved each), far beyond the caches.

The cache lives with the run folders (``$TRAINIUM_LENS_CACHE``, default
``~/.cache/trainium-lens``), ``cpu-roof.json``, or in the file
``$TRAINIUM_LENS_ROOF`` names: measured once per host, as the
result's ``roof.source`` says; measured again when a profiled line ran faster
than the cached roof (it was taken on a busy host), or when other processes
used half a core or more while it was measured (the roof says so) and
``BUSY_RETRY_S`` have passed since, each figure keeping the best of the
measurements. A measurement takes 1.5–3 s of CPU: on a host that stays busy,
measuring again on every run cost each run that much for a figure as low.
"""

from __future__ import annotations

import json
import os
import platform
import time
from datetime import datetime, timezone
from typing import Any

from trainium_lens.harness.events import write_json_atomic
from trainium_lens.harness.runtime.host import HostWindow, load_cores

DTYPES = ("float32", "bfloat16")
COPY_BYTES = 64 << 20
MIN_RUN_S = 0.02
BUDGET_S = 0.6  # per measurement, over all rounds
ROUNDS = 3
BUSY_CORES = 0.5  # other processes using this much CPU while measuring: measure again later
# A roof measured busy is measured again by the first run this long after it, not by every
# run: on a host that stays busy each run paid 1.5–3 s of CPU for another low figure (the
# torch-xla tests measured it 28 times in 3 minutes beside the suite's other tests). A line
# that beats it still has it measured again at once (``below``).
BUSY_RETRY_S = 300.0


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def cache_file() -> str:
    """``$TRAINIUM_LENS_ROOF`` where set: the roof is the host's, not one run store's
    (the tests keep run folders per test and one roof for the machine); else
    ``cpu-roof.json`` beside the run folders."""
    named = os.environ.get("TRAINIUM_LENS_ROOF")
    if named:
        return named
    root = os.environ.get("TRAINIUM_LENS_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "trainium-lens"
    )
    return os.path.join(root, "cpu-roof.json")


def _best(run: Any, budget: float = BUDGET_S) -> float:
    """Fastest of at least three runs within about ``budget`` seconds."""
    best, spent, n = float("inf"), 0.0, 0
    while n < 3 or spent < budget:
        t0 = time.perf_counter()
        run()
        dt = time.perf_counter() - t0
        best, spent, n = min(best, dt), spent + dt, n + 1
        if n >= 50:
            break
    return best


def _matmul(torch: Any, dtype_name: str) -> tuple[Any, int] | None:
    """A product ``run()`` of square ``dtype`` matrices, sized to take ``MIN_RUN_S``."""
    dtype = getattr(torch, dtype_name)
    n = 512
    try:
        a = torch.randn(n, n).to(dtype)
        a @ a  # the first product of a dtype pays one-time set-up (kernel selection, JIT)
        while True:
            a = torch.randn(n, n).to(dtype)
            b = torch.randn(n, n).to(dtype)
            t0 = time.perf_counter()
            a @ b
            if time.perf_counter() - t0 >= MIN_RUN_S or n >= 2048:
                break
            n *= 2
    except RuntimeError:  # no kernel for this dtype on this CPU build
        return None
    return (lambda: a @ b), n


def measure(torch: Any) -> dict:
    """Rounds of every measurement in turn, the best of each kept: a host busy for
    a moment slows one round, not the figure."""
    threads = torch.get_num_threads()
    runs: dict[str, tuple[Any, float]] = {}
    for name in DTYPES:
        made = _matmul(torch, name)
        if made is not None:
            runs[name] = (made[0], 2.0 * made[1] ** 3)
    src = torch.ones(COPY_BYTES // 4)
    dst = torch.empty_like(src)
    dst.copy_(src)
    runs["copy"] = (lambda: dst.copy_(src), 2.0 * COPY_BYTES)
    best = dict.fromkeys(runs, 0.0)
    window = HostWindow().start()
    for _round in range(ROUNDS):
        for name, (run, work) in runs.items():
            best[name] = max(best[name], work / _best(run, BUDGET_S / ROUNDS))
    others = load_cores(window.stop())  # a sibling rank shares the memory bandwidth too
    model = cpu_model()
    # Other processes took CPU while this ran: the figures may be low. Such a roof is
    # used for this run (and says so) but measured again by the next one.
    busy = others is not None and others >= BUSY_CORES
    note = f"; other processes used {others:.1f} cores meanwhile: may be low" if busy else ""
    return {
        "device": f"{model} ({threads} torch threads)",
        "flops": [{"dtype": n, "flops_per_s": best[n]} for n in DTYPES if n in best],
        "bytes_per_s": best["copy"],
        "source": (
            f"measured on this host with torch {torch.__version__}, {threads} threads: the best of "
            f"{ROUNDS} rounds of square matmuls per dtype (up to 2048²) and a 64 MiB copy (read + write)"
            f"{note}"
        ),
        "measured": True,
        "busy": busy,
        "cores": threads,
        # timezone.utc, not datetime.UTC: the harness runs on Python 3.10 (Trn1 venvs)
        "measured_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),  # noqa: UP017
    }


def below(roof: dict, achieved: dict | None) -> bool:
    """Did a profiled line run faster than this roof allows? (then it was measured
    while the host was busy: measure again)"""
    if not achieved:
        return False
    peaks = {p["dtype"]: p["flops_per_s"] for p in roof.get("flops", [])}
    for dtype, rate in (achieved.get("flops") or {}).items():
        if rate > peaks.get(dtype, peaks.get("float32", float("inf"))):
            return True
    return float(achieved.get("bytes_per_s") or 0.0) > float(roof.get("bytes_per_s") or float("inf"))


def best_of(old: dict, new: dict) -> dict:
    """Each figure the higher of two measurements: a busy moment only lowers one."""
    peaks = {p["dtype"]: p["flops_per_s"] for p in old.get("flops", [])}
    for p in new["flops"]:
        peaks[p["dtype"]] = max(p["flops_per_s"], peaks.get(p["dtype"], 0.0))
    merged = dict(new, flops=[{"dtype": d, "flops_per_s": v} for d, v in peaks.items()])
    merged["bytes_per_s"] = max(float(new["bytes_per_s"]), float(old.get("bytes_per_s") or 0.0))
    merged["source"] = new["source"] + " (the best of every measurement on this host)"
    merged["busy"] = bool(new.get("busy")) and bool(old.get("busy"))  # one quiet measurement is enough
    return merged


def _age_s(roof: dict) -> float:
    """Seconds since ``roof`` was measured; an unreadable date counts as long ago."""
    now = datetime.now(timezone.utc)  # noqa: UP017 (timezone.utc: Python 3.10 hosts)
    try:
        return (now - datetime.fromisoformat(str(roof.get("measured_at")))).total_seconds()
    except (TypeError, ValueError):  # no date, or one without a zone
        return float("inf")


def cpu_roof(torch: Any, achieved: dict | None = None) -> dict:
    """The cached roof of this host (measured now on a first run), with its source.

    ``achieved``: the fastest rates the run's lines reached (``{"flops": {dtype:
    FLOP/s}, "bytes_per_s": ...}``); when a line beat the cached roof, that roof
    was measured on a busy host: it is measured again and each figure keeps the
    best of both (a roof only rises)."""
    key = f"{cpu_model()}|threads={torch.get_num_threads()}|torch={torch.__version__}"
    path = cache_file()
    cached: dict = {}
    old: dict = {}
    try:
        with open(path, encoding="utf-8") as fh:
            cached = json.load(fh)
        roof = cached.get(key) if isinstance(cached, dict) else None
        if isinstance(roof, dict) and roof.get("flops") and roof.get("bytes_per_s"):
            if not below(roof, achieved) and not (roof.get("busy") and _age_s(roof) >= BUSY_RETRY_S):
                return dict(roof, source=f"{roof['source']}; measured {roof.get('measured_at', '')}, cached")
            old = roof
    except (OSError, ValueError):
        cached = {}
    roof = best_of(old, measure(torch)) if old else measure(torch)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        data = dict(cached if isinstance(cached, dict) else {}, **{key: roof})
        write_json_atomic(path, data, indent=1)  # a full disk leaves no temporary file
    except (OSError, ValueError):
        pass  # a read-only home: measured again next time
    return roof

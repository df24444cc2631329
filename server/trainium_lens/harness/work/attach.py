"""Glue: run the work step for one profiled function and write its figures into
the result document (``LineStat`` work and memory fields, ``work``, ``memory``,
``roof``). Called once per function by ``eager/run.py``, after everything timed.
A failure here costs only these figures: the run keeps its times and says why."""

from __future__ import annotations

from typing import Any

import torch

from trainium_lens.harness.attribution.kinds import BWD, RECOMPUTE
from trainium_lens.harness.work import calibrate, figures
from trainium_lens.harness.work.step import WorkProfile, work_step

PHASES = {0: "forward", BWD: "backward", RECOMPUTE: "recompute", 3: "optimizer"}
_ROOF: dict[str, dict] = {}  # per process: the CPU roof is measured (or read) once


def achieved(lines: list[dict]) -> dict:
    """The fastest FLOP/s per dtype and bytes/s the profiled lines reached (forward,
    median time): a roof below them was measured on a busy host."""
    flops: dict[str, float] = {}
    bandwidth = 0.0
    for line in lines:
        t = (line.get("self_time_us_median") or line.get("self_time_us") or 0.0) * 1e-6
        if t <= 0:
            continue
        if line.get("flops") and line.get("dtype"):
            flops[line["dtype"]] = max(flops.get(line["dtype"], 0.0), line["flops"] / t)
        bandwidth = max(bandwidth, (line.get("bytes") or 0.0) / t)
    return {"flops": flops, "bytes_per_s": bandwidth}


def roof(backend: Any, lines: list[dict]) -> dict | None:
    """What the harness knows of the roof: the measured CPU peak; on CUDA the device
    and whether fp32 matmuls run as TF32 (the core's table gives the figures)."""
    if backend.name == "cpu":
        # Bytes are an estimate (cache-resident data beats memory bandwidth): only
        # FLOP/s above the roof sends it back to be measured again.
        fast = dict(achieved(lines), bytes_per_s=0.0)
        if "cpu" not in _ROOF or calibrate.below(_ROOF["cpu"], fast):
            _ROOF["cpu"] = calibrate.cpu_roof(torch, fast)
        return dict(_ROOF["cpu"])
    if backend.name == "cuda":
        return {
            "device": torch.cuda.get_device_name(0),
            "tf32": bool(torch.backends.cuda.matmul.allow_tf32),
            "measured": False,
        }
    return None


def add_work(doc: dict, s: Any, call: Any, def_label: str) -> None:
    name = call.name
    s.events.stage(
        "work", name, "FLOPs, bytes and memory: one extra call with shapes and allocations recorded"
    )
    try:
        wp = work_step(call, s.backend)
    except Exception as exc:  # the timed figures stand; say why these are missing
        s.events.warning(f"{name}: no FLOP/byte/memory figures: {type(exc).__name__}: {exc}")
        return
    w = measured(s, wp, def_label, name)
    if w is not None:
        write_work(doc, s, wp, w, name)


def measured(s: Any, wp: WorkProfile, def_label: str | None, name: str | None) -> dict | None:
    """The work figures of a work profile (``figures.measure``), or None and a warning."""
    try:
        return figures.measure(wp, s.labeler.labels, def_label, torch.device(s.backend.device).type)
    except Exception as exc:  # the timed figures stand; say why these are missing
        what = f"{name}: " if name else ""
        s.events.warning(f"{what}no FLOP/byte/memory figures: {type(exc).__name__}: {exc}")
        return None


def write_work(
    doc: dict, s: Any, wp: WorkProfile, w: dict, name: str | None, recorded: str = "the extra call"
) -> None:
    """Each line's work and memory fields, and the result's ``work``, ``memory``, ``roof``.
    ``recorded``: the call or step the work profile recorded, as the memory block says it."""
    labels, mem = s.labeler.labels, w["memory"]
    by_place = {labels[k][:2]: lw for k, lw in w["lines"].items() if k in labels}
    peak = {labels[k][:2]: b for k, b in mem.at_peak.items() if k in labels}
    saved = {labels[k][:2]: b for k, b in mem.saved_by.items() if k in labels}
    acts = {labels[k][:2]: b for k, b in mem.activations_by.items() if k in labels}
    has_memory = mem.events > 0
    for line in doc["lines"]:
        place = (line["file"], line["line"])
        lw = by_place.get(place) or figures.LineWork()
        line.update(
            flops=lw.flops,
            bytes=lw.bytes,
            backward_flops=lw.backward_flops,
            backward_bytes=lw.backward_bytes,
            dtype=lw.dtype(),
            alloc_bytes=lw.alloc_bytes if has_memory else None,
            saved_bytes=float(saved.get(place, 0)) if wp.hooks else None,
            saved_activation_bytes=float(acts.get(place, 0)) if wp.hooks and has_memory else None,
            peak_bytes=float(peak.get(place, 0)) if has_memory else None,
        )
    if s.backend.name == "cpu":
        s.events.stage("work", name, "this host's CPU peak (measured once per host, then cached)")
    try:
        doc["roof"] = roof(s.backend, doc["lines"])
    except Exception as exc:
        s.events.warning(f"{name + ': ' if name else ''}no peak for this device: {type(exc).__name__}: {exc}")
    doc["work"] = w["work"]
    peak_place = labels.get(mem.peak_owner) if mem.peak_owner in labels else None
    doc["memory"] = {
        "device": s.backend.device,
        "available": has_memory,
        "peak_bytes": float(mem.peak_bytes),
        "peak_phase": PHASES.get(mem.peak_phase, "forward") if has_memory else "",
        "peak_file": peak_place[0] if peak_place else None,
        "peak_line": peak_place[1] if peak_place else None,
        "unattributed_peak_bytes": float(mem.at_peak.get(None, 0)),
        "held_before_bytes": float(wp.cuda_before) if wp.cuda_before is not None else None,
        "allocator_peak_bytes": float(wp.cuda_peak) if wp.cuda_peak is not None else None,
        "saved_bytes": float(mem.saved_total) if wp.hooks else None,
        "source": f"profile_memory allocator events of {recorded}",
        "note": None
        if has_memory
        else f"the profiler recorded no allocations on {s.backend.device}: memory per line not available",
    }

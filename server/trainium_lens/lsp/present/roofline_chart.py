"""The results panel's roofline chart and memory view (``trainiumLens/runData``'s
``roofline``, drawn by ``extension/src/panel/roofline.ts``): the analysis's pure
figures (``analysis/roofline/points.py``) laid out as the panel's JSON."""

from __future__ import annotations

from typing import Any

from trainium_lens.analysis.roofline.peaks import resolve
from trainium_lens.analysis.roofline.points import LineRoof, function_mfu, line_roofs
from trainium_lens.model.lines import LineStat
from trainium_lens.model.result import Result


def _point(stat: LineStat, p: LineRoof) -> dict:
    return {
        "file": stat.file,
        "line": stat.line,
        "text": stat.text,
        "phase": p.phase,
        "dtype": p.dtype,
        "flops": p.flops,
        "bytes": p.bytes,
        "time_us": p.time_us,
        "flops_per_s": p.flops_per_s,
        "bytes_per_s": p.bytes_per_s,
        "intensity": p.intensity,
        "pct_of_peak": p.pct_of_peak,
        "bound": p.bound,
        "verdict": p.verdict,
    }


def chart(result: Result) -> dict:
    """What the results panel draws: the roof, one point per line and phase, the
    function's MFU and the step's memory (``trainiumLens/runData``'s ``roofline``)."""
    roof = resolve(result)
    points = [_point(s, p) for s in result.lines for p in line_roofs(result, s, roof)]
    mfu = function_mfu(result, roof)
    mem = result.memory
    held: list[dict[str, Any]] = [
        {
            "file": s.file,
            "line": s.line,
            "text": s.text,
            "peak_bytes": s.peak_bytes or 0.0,
            "saved_bytes": s.saved_bytes or 0.0,
            "saved_activation_bytes": s.saved_activation_bytes or 0.0,
            "alloc_bytes": s.alloc_bytes or 0.0,
        }
        for s in result.lines
        if s.peak_bytes or s.saved_bytes
    ]
    held.sort(key=lambda h: (-float(h["peak_bytes"]), -float(h["saved_bytes"]), h["file"], h["line"]))
    return {
        "roof": None
        if roof is None
        else {
            "device": roof.device,
            "source": roof.source,
            "measured": roof.measured,
            # the function's dominant dtype first: the chart draws its ceiling solid
            "flops": [
                {"dtype": p.dtype, "flops_per_s": p.flops_per_s}
                for p in sorted(roof.flops, key=lambda p: p.dtype != (mfu.dtype if mfu else "float32"))
            ],
            "bytes_per_s": roof.bytes_per_s,
        },
        "points": points,
        "mfu": None
        if mfu is None
        else {
            "mfu": mfu.mfu,
            "flops": mfu.flops,
            "time_us": mfu.time_us,
            "basis": mfu.basis,
            "dtype": mfu.dtype,
        },
        "work": None if result.work is None else {"source": result.work.source, "note": result.work.note},
        "memory": None
        if mem is None
        else {
            "available": mem.available,
            "device": mem.device,
            "peak_bytes": mem.peak_bytes,
            "peak_phase": mem.peak_phase,
            "held_before_bytes": mem.held_before_bytes,
            "saved_bytes": mem.saved_bytes,
            "note": mem.note,
            "lines": held,
        },
    }

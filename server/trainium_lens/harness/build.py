"""Turn one profile's attribution into the result document (a plain dict that
``trainium_lens.result.Result.from_dict`` accepts; the harness cannot import it).

Every figure is per step (per call of the function): the sum over the active
steps divided by their number; spreads are over the active steps.
"""

from __future__ import annotations

import os
import re
import statistics
from typing import Any

from .attribution import Attribution

from .attribution import MAX_WINDOWS, MERGE_GAP_US


def _per_step(values: dict, key: Any, steps: int) -> list[float]:
    return [values.get((s, key), 0.0) for s in range(steps)]


def _spread(values: list[float]) -> tuple[float, float, float]:
    if not values:
        return 0.0, 0.0, 0.0
    return min(values), max(values), statistics.median(values)


def _by_key(values: dict) -> dict:
    out: dict = {}
    for (_step, key), value in values.items():
        out[key] = out.get(key, 0.0) + value
    return out


def merge_windows(windows: list[list[float]], offset: float) -> list[dict]:
    """[[start, end]] on the profiler clock → sorted, merged windows on the trace clock."""
    merged: list[list[float]] = []
    for start, end in sorted(windows):
        if merged and start <= merged[-1][1] + MERGE_GAP_US:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [{"start_us": round(s + offset, 3), "dur_us": round(e - s, 3)}
            for s, e in merged[:MAX_WINDOWS]]


class SourceText:
    """Source lines of user files (read once each) for ``LineStat.text``."""

    def __init__(self, root: str, locate=None):
        self.root = root
        self.locate = locate  # rel -> absolute path (included library files live elsewhere)
        self._cache: dict[str, list[str]] = {}

    def line(self, rel: str, line: int) -> str:
        lines = self._cache.get(rel)
        if lines is None:
            try:
                path = self.locate(rel) if self.locate else os.path.join(self.root, rel)
                with open(path, encoding="utf-8", errors="replace") as fh:
                    lines = fh.read().splitlines()
            except OSError:
                lines = []
            self._cache[rel] = lines
        return lines[line - 1].strip() if 0 < line <= len(lines) else ""


def trace_offset_us(trace_path: str | None, trace_start_ns: int | None) -> float:
    """FunctionEvent times are µs since the trace start; the exported trace's ``ts``
    is µs since its ``baseTimeNanoseconds``. Offset between the two clocks."""
    if not trace_path or trace_start_ns is None:
        return 0.0
    try:  # the key sits in the header (kineto writes it before traceEvents)
        with open(trace_path, "rb") as fh:
            text = fh.read(65536)
            fh.seek(0, os.SEEK_END)
            fh.seek(max(len(text), fh.tell() - 65536))
            text += fh.read()
    except OSError:
        return 0.0
    m = re.search(rb'"baseTimeNanoseconds"\s*:\s*(\d+)', text)
    base = int(m.group(1)) if m else 0
    return (trace_start_ns - base) / 1000.0


def lines_and_ops(att: Attribution, labels: dict, source: SourceText) -> dict:
    n = max(att.steps, 1)
    keys = {k for (_s, k) in att.line_self} | {k for (_s, k) in att.line_total} | set(att.line_calls)
    keys.discard(None)
    per_line_ops: dict[str, list[dict]] = {}
    order: dict[tuple, int] = {}
    for (key, op), (calls, self_t, cpu, direct, seen) in att.line_ops.items():
        if key is None:
            continue
        order[(key, op)] = seen
        per_line_ops.setdefault(key, []).append(
            {"name": op, "calls": calls / n, "self_time_us": self_t / n, "self_cpu_us": cpu / n,
             "direct_calls": direct / n})
    self_sum = _by_key(att.line_self)
    total_sum = _by_key(att.line_total)
    cpu_sum = _by_key(att.line_cpu)
    lines = []
    for key in keys:
        file, line, function = labels[key]
        steps = _per_step(att.line_self, key, att.steps)
        lo, hi, med = _spread(steps)
        # What the line itself dispatched, in program order (stable however noisy
        # the clock), then what ran inside those ops, biggest first.
        ops = sorted(per_line_ops.get(key, []), key=lambda o: (
            (0, order[(key, o["name"])]) if o["direct_calls"] else (1, -o["self_time_us"])))
        lines.append({
            "file": file, "line": line,
            "self_time_us": self_sum.get(key, 0.0) / n,
            "total_time_us": total_sum.get(key, 0.0) / n,
            "self_cpu_us": cpu_sum.get(key, 0.0) / n,
            "calls": att.line_calls.get(key, 0) / n,
            "self_time_us_min": lo, "self_time_us_max": hi, "self_time_us_median": med,
            "text": source.line(file, line), "function": function, "ops": ops,
        })
    # one entry per source line: the same line can carry two labels only if two
    # functions share it (lambdas); keep them apart but sorted together
    lines.sort(key=lambda s: (-s["self_time_us"], -s["total_time_us"], s["file"], s["line"]))
    ops = [{"name": name, "calls": c / n, "self_time_us": s / n, "total_time_us": t / n,
            "self_cpu_us": cpu / n, "device_time_us": dev / n}
           for name, (c, s, t, cpu, dev) in att.ops.items()]
    ops.sort(key=lambda o: (-o["self_time_us"], o["name"]))
    per_step_total = [0.0] * att.steps
    for (step, _key), value in att.line_self.items():
        if 0 <= step < att.steps:
            per_step_total[step] += value
    return {
        "lines": lines,
        "ops": ops,
        "unattributed_us": self_sum.get(None, 0.0) / n,
        "self_time_us": sum(o["self_time_us"] for o in ops),
        "self_cpu_us": sum(o["self_cpu_us"] for o in ops),
        "dispatches": sum(c for k, c in att.line_calls.items() if k is not None) / n,
        "per_step": per_step_total,
    }

"""Per-line, per-instruction and per-phase figures of an xla capture, in the
result fields every backend writes (as ``attribution/figures.py`` does for
torch.profiler): per step, spreads over the measured steps.

A line's ``self_time_us``/``total_time_us`` are forward (optimizer instructions
included: forward work of the ``optimizer.step()`` line), its ``backward_*`` the
backward instructions its forward ops' autograd nodes caused (``xla/tags.py``).
The totals split ``self_time_us`` into forward / backward / optimizer; buckets
and unattributed time count as forward. Everything adds up to the sum of every
executed instruction's time.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from trainium_lens.harness.attribution.figures import hottest_first
from trainium_lens.harness.xla.credit import BACKWARD, FORWARD, Place, XlaAttribution

BUCKET_NAMES = 5  # instruction names kept per bucket (the JSON keeps the biggest)


def _spread(values: list[float]) -> tuple[float, float, float]:
    if not values:
        return 0.0, 0.0, 0.0
    return min(values), max(values), statistics.median(values)


def _ref_order(ref: dict) -> tuple[bool, str, float]:
    """Credited instructions first (forward, then backward), then by time."""
    return (not ref["credited"], ref["phase"], -float(ref["self_time_us"]))


class _PerStep:
    def __init__(self, steps: int):
        self.steps = steps
        self.values: dict[Any, list[float]] = {}

    def add(self, key: Any, step: int, value: float) -> None:
        row = self.values.get(key)
        if row is None:
            row = self.values[key] = [0.0] * self.steps
        row[step] += value

    def mean(self, key: Any) -> float:
        return sum(self.values.get(key, ())) / max(self.steps, 1)

    def spread(self, key: Any) -> tuple[float, float, float]:
        return _spread(self.values.get(key, [0.0] * self.steps))


def figures(att: XlaAttribution, text: Callable[[str, int], str]) -> dict:
    """Lines, ops, regions, buckets, optimizers and totals (per step)."""
    n = max(att.steps, 1)
    per_key: dict[tuple[str, str], float] = {}
    for (_step, key), t in att.time.items():
        per_key[key] = per_key.get(key, 0.0) + t
    self_s, total_s = _PerStep(att.steps), _PerStep(att.steps)
    phase_s = _PerStep(att.steps)  # "forward" | "backward" | "optimizer" | "all"
    buckets: dict[str, float] = {}
    unattributed = 0.0
    for (step, key), t in att.time.items():
        c = att.credits[key]
        phase_s.add("all", step, t)
        if not c.stack:
            if c.bucket:
                buckets[c.bucket] = buckets.get(c.bucket, 0.0) + t
            else:
                unattributed += t
            phase_s.add(FORWARD, step, t)
            continue
        place = c.stack[0]
        self_s.add((place, c.phase), step, t)
        for outer in c.stack:
            total_s.add((outer, c.phase), step, t)
        optimizer = c.phase == FORWARD and place in att.optimizer_places
        phase_s.add("optimizer" if optimizer else c.phase, step, t)
    calls_t: dict[Place, float] = {}
    refs: dict[Place, list[dict]] = {}
    line_ops: dict[tuple[Place, str], list[dict]] = {}
    for key, c in att.credits.items():
        if not c.stack:
            continue
        module, name = key
        ins = att.instrs.get(key)
        t, calls = per_key.get(key, 0.0) / n, att.calls.get(key, 0) / n
        place = c.stack[0]
        if c.phase == FORWARD:
            calls_t[place] = calls_t.get(place, 0.0) + calls
        ref = {
            "name": name,
            "module": module,
            "opcode": ins.opcode if ins else "",
            "op_type": ins.op_type if ins else "",
            "self_time_us": t,
            "calls": calls,
            "credited": True,
            "line": place[1],
            "phase": c.phase,
        }
        refs.setdefault(place, []).append(ref)
        op = {"name": name, "calls": calls, "self_time_us": t, "self_cpu_us": t, "direct_calls": calls}
        if c.phase == BACKWARD:
            op["node"] = c.node
        line_ops.setdefault((place, c.phase), []).append(op)
        for other in c.covered:
            if other != place:
                refs.setdefault(other, []).append(dict(ref, credited=False))
    places = {p for p, _phase in self_s.values} | {p for p, _phase in total_s.values} | set(refs)
    lines = [
        _line(place, self_s, total_s, calls_t, refs, line_ops, text(place[0], place[1])) for place in places
    ]
    lines.sort(key=hottest_first)
    ops: list[dict[str, Any]] = [
        {
            "name": key[1],
            "calls": att.calls.get(key, 0) / n,
            "self_time_us": t / n,
            "total_time_us": t / n,
            "self_cpu_us": t / n,
            "device_time_us": 0.0,
        }
        for key, t in per_key.items()
    ]
    ops.sort(key=lambda o: (-o["self_time_us"], o["name"]))
    return {
        "lines": lines,
        "ops": ops,
        "regions": _regions(att, per_key, n),
        "buckets": _buckets(att, per_key, buckets, n),
        "optimizers": _optimizers(att, per_key, n),
        "unattributed_us": unattributed / n,
        "self_time_us": sum(o["self_time_us"] for o in ops),
        "forward_time_us": phase_s.mean(FORWARD),
        "backward_time_us": phase_s.mean(BACKWARD),
        "optimizer_time_us": phase_s.mean("optimizer"),
        "dispatches": 0.0,  # an eager notion: a compiled graph dispatches no op by op
        "per_step": phase_s.values.get("all", [0.0] * att.steps),
    }


def _line(
    place: Place,
    self_s: _PerStep,
    total_s: _PerStep,
    calls_t: dict[Place, float],
    refs: dict[Place, list[dict]],
    line_ops: dict[tuple[Place, str], list[dict]],
    text: str,
) -> dict[str, Any]:
    file, line, function = place
    lo, hi, med = self_s.spread((place, FORWARD))
    blo, bhi, bmed = self_s.spread((place, BACKWARD))
    forward, backward = self_s.mean((place, FORWARD)), self_s.mean((place, BACKWARD))
    return {
        "file": file,
        "line": line,
        "self_time_us": forward,
        "total_time_us": total_s.mean((place, FORWARD)),
        "self_cpu_us": forward,
        "calls": calls_t.get(place, 0.0),
        "self_time_us_min": lo,
        "self_time_us_max": hi,
        "self_time_us_median": med,
        "text": text,
        "function": function,
        "ops": sorted(line_ops.get((place, FORWARD), []), key=lambda o: -o["self_time_us"]),
        "instructions": sorted(refs.get(place, []), key=_ref_order),
        "backward_self_time_us": backward,
        "backward_total_time_us": total_s.mean((place, BACKWARD)),
        "backward_self_cpu_us": backward,
        "backward_self_time_us_min": blo,
        "backward_self_time_us_max": bhi,
        "backward_self_time_us_median": bmed,
        "backward_ops": sorted(line_ops.get((place, BACKWARD), []), key=lambda o: -o["self_time_us"]),
        # schema 3: the regression gate's samples, forward + backward per step
        "step_us": [
            round(f + b, 3)
            for f, b in zip(
                self_s.values.get((place, FORWARD), [0.0] * self_s.steps),
                self_s.values.get((place, BACKWARD), [0.0] * self_s.steps),
                strict=True,
            )
        ],
    }


def line_phases(line: dict) -> list[tuple[float, float]]:
    """A line's (FLOPs, time µs) forward and backward, by the median time over the
    measured steps (what the roofline shows: analysis/roofline/points.py)."""
    return [
        (line.get("flops") or 0.0, line.get("self_time_us_median") or line.get("self_time_us") or 0.0),
        (
            line.get("backward_flops") or 0.0,
            line.get("backward_self_time_us_median") or line.get("backward_self_time_us") or 0.0,
        ),
    ]


def _regions(att: XlaAttribution, per_key: dict, n: int) -> list[dict[str, Any]]:
    """One per fusion credited to a line (the JSON keeps them all; the CLI and the
    editor group them per line)."""
    regions: list[dict[str, Any]] = []
    for key, c in att.credits.items():
        ins = att.instrs.get(key)
        if ins is None or ins.opcode != "fusion" or not c.stack:
            continue
        file, line, _fn = c.stack[0]
        regions.append(
            {
                "name": key[1],
                "file": file,
                "line": line,
                "self_time_us": per_key.get(key, 0.0) / n,
                "calls": att.calls.get(key, 0) / n,
                "covered_lines": [{"file": f, "line": ln} for f, ln, _ in c.covered],
                "fx_nodes": c.fused,
            }
        )
    regions.sort(key=lambda r: -r["self_time_us"])
    return regions


def _buckets(att: XlaAttribution, per_key: dict, times: dict[str, float], n: int) -> list[dict[str, Any]]:
    out = []
    for name, t in sorted(times.items(), key=lambda kv: -kv[1]):
        members = [k for k, c in att.credits.items() if not c.stack and c.bucket == name]
        members.sort(key=lambda k: -per_key.get(k, 0.0))
        out.append(
            {
                "name": name,
                "self_time_us": t / n,
                "calls": sum(att.calls.get(k, 0) for k in members) / n,
                "instructions": [k[1] for k in members[:BUCKET_NAMES]],
            }
        )
    return out


def _optimizers(att: XlaAttribution, per_key: dict, n: int) -> list[dict[str, Any]]:
    """Per optimizer range name: the forward instructions of the lines that called it."""
    out: dict[str, dict[str, Any]] = {}
    for key, c in att.credits.items():
        if not c.stack or c.phase != FORWARD or c.stack[0] not in att.optimizer_places:
            continue
        place = c.stack[0]
        name = att.optimizer_places[place]
        entry = out.setdefault(
            name,
            {
                "name": name,
                "file": place[0],
                "line": place[1],
                "calls": att.optimizer_calls.get(name, 0) / n,
                "ops": 0.0,
                "fused_ops": 0.0,
            },
        )
        entry["ops"] += att.calls.get(key, 0) / n
        entry["self_time_us"] = entry.get("self_time_us", 0.0) + per_key.get(key, 0.0) / n
    return sorted(out.values(), key=lambda o: (o["file"], o["line"]))

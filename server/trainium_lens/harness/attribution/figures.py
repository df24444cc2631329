"""Per-line and per-op figures of one profile, from its ``Attribution``.

Every figure is per step (per call of the function): the sum over the active
steps divided by their number; spreads are over the active steps. A line's
``self_time_us``/``total_time_us`` are its forward figures (optimizer ops
included: they are forward ops of the ``optimizer.step()`` line); its
``backward_*`` figures are the backward its forward ops caused; ``recompute``
is forward work re-run inside the backward (``torch.utils.checkpoint``).
"""

from __future__ import annotations

import statistics
from typing import Any

from trainium_lens.harness.attribution.kinds import BWD, FWD, OPTIMIZER, RECOMPUTE
from trainium_lens.harness.attribution.tree import Attribution


def hottest_first(line: dict) -> tuple:
    """The order of a result's lines, eager and XLA alike: forward + backward self time,
    then total time, hottest first; file and line break ties."""
    return (
        -(line["self_time_us"] + line["backward_self_time_us"]),
        -line["total_time_us"],
        line["file"],
        line["line"],
    )


def _spread(values: list[float]) -> tuple[float, float, float]:
    if not values:
        return 0.0, 0.0, 0.0
    return min(values), max(values), statistics.median(values)


class _Sums:
    """``(step, label, phase) -> value`` summed over the steps, and per step
    (per call: a step of ``calls`` calls counts its sum over them)."""

    def __init__(self, values: dict, steps: int, calls: int = 1):
        self.steps = steps
        self.by_key: dict[tuple, float] = {}
        self.per_step: dict[tuple, list[float]] = {}
        outside: dict[tuple, float] = {}
        for (step, key, phase), value in values.items():
            k = (key, phase)
            self.by_key[k] = self.by_key.get(k, 0.0) + value
            row = self.per_step.get(k)
            if row is None:
                row = self.per_step[k] = [0.0] * steps
            if 0 <= step < steps:
                row[step] += value / calls
            else:
                outside[k] = outside.get(k, 0.0) + value
        # Time between the steps (walked as step -1: ops outside every ProfilerStep, a
        # script's data wait) is in the per-step figure (the sum over ``steps``) but in no
        # step: each step takes an even share of it, so the figure is the mean of its own
        # spread (without it a line read a mean above its own max).
        for k, value in outside.items():
            share = value / (max(steps, 1) * calls)
            self.per_step[k] = [v + share for v in self.per_step[k]]

    def get(self, key: Any, phase: int) -> float:
        return self.by_key.get((key, phase), 0.0)

    def spread(self, key: Any, phase: int) -> tuple[float, float, float]:
        return _spread(self.per_step.get((key, phase), [0.0] * self.steps))

    def step_sum(self, key: Any, phases: tuple[int, ...]) -> list[float]:
        """Per measured step, the sum over ``phases`` (rounded to ns: the samples
        are stored per line, a few per step, and exactness past a ns is noise)."""
        out = [0.0] * self.steps
        for phase in phases:
            for i, v in enumerate(self.per_step.get((key, phase), ())):
                out[i] += v
        return [round(v, 3) for v in out]


def _line_ops(att: Attribution, n: int) -> dict[tuple[str, int], list[dict]]:
    """(label, phase) -> its ops: forward in program order (what the line
    dispatched itself first), the rest by self time."""
    grouped: dict[tuple[str, int], list[tuple[tuple, dict]]] = {}
    for (key, op, phase, node), lo in att.line_ops.items():
        if key is None:
            continue
        entry = {
            "name": op,
            "calls": lo.calls / n,
            "self_time_us": lo.self_time / n,
            "self_cpu_us": lo.cpu / n,
            "direct_calls": lo.direct / n,
        }
        if phase == BWD:
            entry["node"] = node
        order = (0, lo.order) if lo.direct and phase != BWD else (1, -lo.self_time)
        grouped.setdefault((key, phase), []).append((order, entry))
    return {k: [e for _o, e in sorted(v, key=lambda oe: oe[0])] for k, v in grouped.items()}


def lines_and_ops(att: Attribution, labels: dict, source: Any) -> dict:
    """The result's ``lines``, ``ops``, ``unattributed_us`` and the totals' figures."""
    m = max(att.calls_per_step, 1)
    n = max(att.steps, 1) * m
    self_s = _Sums(att.line_self, att.steps, m)
    total_s = _Sums(att.line_total, att.steps, m)
    cpu_s = _Sums(att.line_cpu, att.steps, m)
    host_s = _Sums(att.line_host, att.steps, m)
    per_line_ops = _line_ops(att, n)
    keys = (
        {k for (k, _p) in self_s.by_key}
        | {k for (k, _p) in total_s.by_key}
        | set(att.line_calls)
        | {k for (k, _p) in host_s.by_key}
    )
    keys.discard(None)
    lines = []
    for key in keys:
        file, line, function = labels[key]
        lo, hi, med = self_s.spread(key, FWD)
        blo, bhi, bmed = self_s.spread(key, BWD)
        # Backward ops merged over the nodes that ran them (the hover names the nodes).
        lines.append(
            {
                "file": file,
                "line": line,
                "self_time_us": self_s.get(key, FWD) / n,
                "total_time_us": total_s.get(key, FWD) / n,
                "self_cpu_us": cpu_s.get(key, FWD) / n,
                "calls": att.line_calls.get(key, 0) / n,
                "self_time_us_min": lo,
                "self_time_us_max": hi,
                "self_time_us_median": med,
                "text": source.line(file, line),
                "function": function,
                "ops": per_line_ops.get((key, FWD), []),
                "backward_self_time_us": self_s.get(key, BWD) / n,
                "backward_total_time_us": total_s.get(key, BWD) / n,
                "backward_self_cpu_us": cpu_s.get(key, BWD) / n,
                "backward_self_time_us_min": blo,
                "backward_self_time_us_max": bhi,
                "backward_self_time_us_median": bmed,
                "backward_ops": per_line_ops.get((key, BWD), []),
                "recompute_time_us": self_s.get(key, RECOMPUTE) / n,
                "recompute_ops": per_line_ops.get((key, RECOMPUTE), []),
                # schema 3: what the line cost in each measured step (fwd + bwd +
                # recompute, as ``LineStat.time_us``): the regression gate's samples
                "step_us": self_s.step_sum(key, (FWD, BWD, RECOMPUTE)),
                "host_time_us": sum(host_s.get(key, p) for p in (FWD, BWD, RECOMPUTE)) / n,
            }
        )
    lines.sort(key=hottest_first)
    ops = [
        {
            "name": name,
            "calls": f.calls / n,
            "self_time_us": f.self_time / n,
            "total_time_us": f.total_time / n,
            "self_cpu_us": f.cpu / n,
            "device_time_us": f.device / n,
        }
        for name, f in att.ops.items()
    ]
    ops.sort(key=lambda o: (-o["self_time_us"], o["name"]))
    per_step = [0.0] * att.steps
    phases = [0.0, 0.0, 0.0, 0.0]
    between = 0.0  # outside every step: an even share to each (as _Sums does)
    for (step, phase), value in att.phase_time.items():
        phases[phase] += value
        if 0 <= step < att.steps:
            per_step[step] += value / m
        else:
            between += value
    per_step = [v + between / n for v in per_step]
    unattributed = sum(v for (k, _p), v in self_s.by_key.items() if k is None)
    return {
        "lines": lines,
        "ops": ops,
        "unattributed_us": unattributed / n,
        "self_time_us": sum(o["self_time_us"] for o in ops),
        "self_cpu_us": sum(o["self_cpu_us"] for o in ops),
        "forward_time_us": phases[FWD] / n,
        "backward_time_us": phases[BWD] / n,
        "recompute_time_us": phases[RECOMPUTE] / n,
        "optimizer_time_us": phases[OPTIMIZER] / n,
        "dispatches": sum(c for k, c in att.line_calls.items() if k is not None) / n,
        "per_step": per_step,
        "host_time_us": sum(host_s.by_key.values()) / n,
        "host_measured": bool(att.line_host) or att.host_read,
    }


def optimizers(att: Attribution, labels: dict, fallback: tuple[str, int]) -> list[dict]:
    """One entry per optimizer range name (``Optimizer.step#AdamW.step``)."""
    n = max(att.steps, 1) * max(att.calls_per_step, 1)
    out = []
    for name, f in att.optimizers.items():
        file, line = labels[f.key][:2] if f.key in labels else fallback
        out.append(
            {
                "name": name,
                "file": file,
                "line": line,
                "calls": f.calls / n,
                "ops": f.ops / n,
                "fused_ops": f.fused_ops / n,
                "self_time_us": f.self_time / n,
            }
        )
    out.sort(key=lambda o: (o["file"], o["line"], o["name"]))
    return out

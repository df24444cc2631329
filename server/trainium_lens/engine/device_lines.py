"""Device-profile figures → a result's lines, ops, regions and totals (clock ``neuron``).

``apply`` takes the per-line reports of every device profile of a run (each with
the factor that makes it per step: 1 for a model-mode capture of one step, 1/N
for a session profile of N steps) and writes them into the result in place. What
the device profile cannot say is not left looking like device time:

* backend ``xla``: the lines' ops are the device instructions credited to them;
  an instruction the host result lists under a line's ``backward_ops`` is that
  line's backward (``phases``), the rest forward;
* backend ``neuron`` (TorchNeuron): the lines keep their ATen ops (calls, CPU
  time) with no per-op device time (the profile has instructions, not ops: they
  are listed as the line's ``instructions``), and the host's forward/backward
  split, a CPU figure, is cleared: the device profile does not tell them apart.

Work per line (the roofline's ``LineStat.flops``/``bytes`` and their backward twins,
per call) is set only where the result model has those fields.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field

from trainium_lens.model.evidence import Work
from trainium_lens.model.lines import (
    BackwardOp,
    EngineTime,
    HloRef,
    LineOp,
    LineStat,
    OpStat,
    Region,
    SourceLine,
)
from trainium_lens.model.result import Result
from trainium_lens.traces.neuron_lines import LineReport

Weighted = tuple[LineReport, float]  # a report and its factor to per step


@dataclass
class _Line:
    self_ns: float = 0.0
    total_ns: float = 0.0
    backward_ns: float = 0.0
    backward_total_ns: float = 0.0
    engines: dict[str, float] = field(default_factory=dict)
    per_hlo: dict[str, float] = field(default_factory=dict)
    covered: set[str] = field(default_factory=set)
    work: dict[str, float] = field(default_factory=dict)
    backward_work: dict[str, float] = field(default_factory=dict)


def _add(into: dict[str, float], items: dict[str, int], scale: float) -> None:
    for key, value in items.items():
        into[key] = into.get(key, 0.0) + value * scale


def rel(file: str, root: str) -> str:
    if root and file.startswith(root + "/"):
        return posixpath.normpath(file[len(root) + 1 :])
    return file


def _collect(reports: list[Weighted], root: str) -> dict[tuple[str, int], _Line]:
    per_line: dict[tuple[str, int], _Line] = {}
    for report, scale in reports:
        for t in report.lines:
            acc = per_line.setdefault((rel(t.file, root), t.line), _Line())
            acc.self_ns += t.time_ns * scale
            acc.total_ns += t.total_ns * scale
            acc.backward_ns += t.backward_ns * scale
            acc.backward_total_ns += t.backward_total_ns * scale
            _add(acc.engines, t.engines, scale)
            _add(acc.per_hlo, t.per_hlo, scale)
            _add(acc.work, t.work, scale)
            _add(acc.backward_work, t.backward_work, scale)
            acc.covered.update(t.covered)
    return per_line


def _set_work(stat: LineStat, acc: _Line, fields: set[str]) -> None:
    """The line's work from the device profile (docs/roofline.md), where the export has it."""
    if "raw_flops" not in fields:
        return
    # raw_flops: the instruction's real FLOPs (2 per MAC); adjusted_flops is the
    # BF16-equivalent for utilisation and stays in the reader's report
    hbm = ("hbm_read_bytes", "hbm_write_bytes")
    figures = {
        "flops": acc.work.get("raw_flops", 0.0),
        "backward_flops": acc.backward_work.get("raw_flops", 0.0),
    }
    if set(hbm) <= fields:
        figures["bytes"] = sum(acc.work.get(k, 0.0) for k in hbm)
        figures["backward_bytes"] = sum(acc.backward_work.get(k, 0.0) for k in hbm)
    for name, value in figures.items():
        setattr(stat, name, value)


def apply(result: Result, reports: list[Weighted], root: str, phases: dict[str, str]) -> None:
    per_line = _collect(reports, root)
    credited_at = {name: key for key, acc in per_line.items() for name in acc.per_hlo}
    opcodes = {name: op for report, _s in reports for name, op in report.opcodes.items()}
    fields = {f for report, _s in reports for f in report.work_fields}
    native = result.backend == "neuron"
    host = {(s.file, s.line): s for s in result.lines}
    lines = []
    for key in sorted(set(per_line) | set(host)):
        acc = per_line.get(key, _Line())
        stat = host.get(key) or LineStat(key[0], key[1], 0.0, 0.0, 0.0, 0.0)
        us = acc.self_ns / 1000.0
        stat.self_time_us = stat.self_time_us_min = stat.self_time_us_max = stat.self_time_us_median = us
        stat.total_time_us = max(acc.total_ns, acc.self_ns) / 1000.0
        back = acc.backward_ns / 1000.0
        stat.backward_self_time_us = stat.backward_self_time_us_min = back
        stat.backward_self_time_us_max = stat.backward_self_time_us_median = back
        stat.backward_total_time_us = max(acc.backward_total_ns, acc.backward_ns) / 1000.0
        stat.recompute_time_us = 0.0
        # one device-profiled figure per line: one sample (the gate says it cannot judge noise)
        stat.step_us = [us + back]
        stat.engines = [EngineTime(e, ns / 1000.0) for e, ns in sorted(acc.engines.items())]
        by_time = sorted(acc.per_hlo.items(), key=lambda kv: -kv[1])
        if native:  # ATen ops stay (calls, CPU); the profile has no per-op device time
            for op in stat.ops + stat.recompute_ops:
                op.self_time_us = 0.0
            for bop in stat.backward_ops:
                bop.self_time_us = 0.0
        else:
            nodes = {b.name: b.node for b in stat.backward_ops}
            stat.ops = [
                LineOp(n, 1.0, ns / 1000.0, 0.0, 1.0) for n, ns in by_time if phases.get(n) != "backward"
            ]
            stat.backward_ops = [
                BackwardOp(n, 1.0, ns / 1000.0, 0.0, 1.0, nodes.get(n, ""))
                for n, ns in by_time
                if phases.get(n) == "backward"
            ]
        stat.instructions = [
            HloRef(
                name,
                opcode=opcodes.get(name, ""),
                self_time_us=ns / 1000.0,
                calls=1.0,
                line=key[1],
                phase=phases.get(name, "forward"),
            )
            for name, ns in by_time
        ] + [
            HloRef(
                name,
                opcode=opcodes.get(name, ""),
                credited=False,
                line=credited_at[name][1],
                self_time_us=per_line[credited_at[name]].per_hlo[name] / 1000.0,
            )
            for name in sorted(acc.covered)
            if name in credited_at
        ]
        _set_work(stat, acc, fields)
        lines.append(stat)
    result.lines = lines
    if native:
        for row in result.ops:
            row.self_time_us = row.total_time_us = row.device_time_us = 0.0
    else:
        result.ops = sorted(
            (
                OpStat(name, 1.0, ns / 1000.0, ns / 1000.0, 0.0, ns / 1000.0)
                for acc in per_line.values()
                for name, ns in acc.per_hlo.items()
            ),
            key=lambda o: (-o.self_time_us, o.name),
        )
    result.regions = _regions(per_line, credited_at)
    _totals(result, reports, per_line)
    if "raw_flops" in fields:  # the device's own count replaces the host's (HLO shapes)
        result.work = Work(
            source="neuron-profile",
            flops=sum((s.flops or 0.0) + (s.backward_flops or 0.0) for s in lines),
            bytes=sum((s.bytes or 0.0) + (s.backward_bytes or 0.0) for s in lines),
            note="raw_flops and HBM read + write bytes of the device profile's instructions",
        )


def _regions(per_line: dict[tuple[str, int], _Line], credited_at: dict) -> list[Region]:
    covers: dict[str, list[SourceLine]] = {}
    for key, acc in per_line.items():
        for name in acc.covered:
            covers.setdefault(name, []).append(SourceLine(*key))
    return [
        Region(
            name,
            credited_at[name][0],
            credited_at[name][1],
            per_line[credited_at[name]].per_hlo[name] / 1000.0,
            1.0,
            sorted(covered + [SourceLine(*credited_at[name])], key=lambda s: s.line),
        )
        for name, covered in sorted(covers.items())
        if name in credited_at
    ]


def _totals(result: Result, reports: list[Weighted], per_line: dict[tuple[str, int], _Line]) -> None:
    busy = sum(r.busy_ns * s for r, s in reports) / 1000.0
    totals = result.totals
    totals.self_time_us = totals.self_time_us_min = totals.self_time_us_max = busy
    totals.per_step_self_time_us = [busy]
    totals.step_us = [busy]
    totals.steps = totals.steps or 1
    # the split must add up to self time: backward as the lines' backward time (each
    # instruction is credited once), the rest forward; optimizer and recompute are
    # not told apart in a device profile
    backward = min(busy, sum(a.backward_ns for a in per_line.values()) / 1000.0)
    totals.backward_time_us, totals.forward_time_us = backward, busy - backward
    totals.optimizer_time_us = totals.recompute_time_us = 0.0
    for opt in result.optimizers:  # a host figure: not shown as device time
        opt.self_time_us = 0.0
    result.unattributed_us = sum(r.unattributed_ns * s for r, s in reports) / 1000.0
    # The host's named buckets (xla: graph plumbing) are host-clock figures; on the
    # device those instructions have no frame and count as unattributed above, so
    # keeping the buckets would add one clock to another.
    result.buckets = []

"""TorchNeuron (backend neuron): device time per line through TorchNeuron's own op map
where it was written (docs/neuron.md, "The exact join").

``device_profile.fill`` first credits the session profile's instructions to lines by
their stack frames (``device_lines.apply``). Where the processed view also holds
``framework_mapping_*.json`` (the harness copies it there from NeuronConfig's
folder), ``place`` then joins each runtime execution to the op that submitted it
(``traces/neuron_join.py``: by sequence number and PyTorch thread, order and time
rules where a key is shared) and from the op to the line the harness tagged it with
in the run's trace; the lines' times, forward and backward, and the ops' device
time become those of the join. The result says per run which join placed how much
(``signals.warnings``). Without a map the stack-frame figures stay, and the result
says there was none.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from pathlib import Path

from trainium_lens.model.lines import LineStat
from trainium_lens.model.result import Result
from trainium_lens.traces import neuron_mapping
from trainium_lens.traces.chrome import read_trace_json
from trainium_lens.traces.neuron_export import has_tables
from trainium_lens.traces.neuron_join import HostOp, JoinReport, host_ops, join

Fetch = Callable[[str, Path], Path]


def place(result: Result, folders: list[Path], steps: int, trace: Path | None) -> str:
    """Join the executions under ``folders`` to the trace's ops and write the lines'
    device time into ``result``; returns the note that says what was done."""
    maps = [m for m in (neuron_mapping.read(f) for f in folders) if m is not None]
    if not maps:
        return (
            "TorchNeuron wrote no framework_mapping file (it needs runtime and PyTorch profiling "
            "on together, and none under NEURON_LAUNCH_BLOCKING=1): device time reached lines "
            "through the device profile's stack frames"
        )
    if trace is None:
        return "TorchNeuron's op map was written but the run kept no trace to join it with: stack frames used"
    mapping = maps[0]
    for more in maps[1:]:
        mapping.executions.update(more.executions)
        mapping.files += more.files
    execs, why = [], ""
    for folder in folders:
        for profile in (
            [folder] if has_tables(folder) else sorted(p for p in folder.rglob("*") if has_tables(p))
        ):
            found, reason = neuron_mapping.executions(profile)
            execs += found
            why = why or reason
    if not execs:
        why = why or "the device profile lists no executions"
        return f"TorchNeuron's op map was written but {why}: device time through the stack frames"
    ops = host_ops(read_trace_json(trace))
    report = join(ops, execs, mapping)
    _write(result, report, ops, max(1, steps))
    return report.summary()


def _rel(file: str, root: str) -> str:
    if root and file.startswith(root + "/"):
        return posixpath.normpath(file[len(root) + 1 :])
    return file


def _write(result: Result, report: JoinReport, ops: list[HostOp], steps: int) -> None:
    root = (result.artifacts.source_root or "").rstrip("/")
    us = 1.0 / (1000.0 * steps)
    per: dict[tuple[str, int], dict[str, float]] = {}
    per_op: dict[tuple[str, int, str, str], float] = {}
    total: dict[tuple[str, int], dict[str, float]] = {}
    for ((file, line), phase), ns in report.total_ns.items():
        key, side = (_rel(file, root), line), "backward" if phase == "backward" else "forward"
        total.setdefault(key, {}).setdefault(side, 0.0)
        total[key][side] += ns * us
        per.setdefault(key, {})  # a caller with no op of its own still gets its line
    for i, ns in report.op_ns.items():
        op = ops[i]
        if op.place is None:
            continue
        key = (_rel(op.place[0], root), op.place[1])
        phase = "backward" if op.phase == "backward" else "forward"
        per.setdefault(key, {}).setdefault(phase, 0.0)
        per[key][phase] += ns * us
        per_op[(*key, phase, op.name)] = per_op.get((*key, phase, op.name), 0.0) + ns * us
    host = {(s.file, s.line): s for s in result.lines}
    for key in per.keys() - host.keys():
        stat = LineStat(key[0], key[1], 0.0, 0.0, 0.0, 0.0)
        host[key] = stat
        result.lines.append(stat)
    for key, stat in host.items():
        fwd, back = per.get(key, {}).get("forward", 0.0), per.get(key, {}).get("backward", 0.0)
        stat.self_time_us = stat.self_time_us_min = stat.self_time_us_max = stat.self_time_us_median = fwd
        stat.total_time_us = max(total.get(key, {}).get("forward", 0.0), fwd)
        stat.backward_self_time_us = stat.backward_self_time_us_min = back
        stat.backward_self_time_us_max = stat.backward_self_time_us_median = back
        stat.backward_total_time_us = max(total.get(key, {}).get("backward", 0.0), back)
        stat.step_us = [fwd + back]
        for lop in stat.ops:
            lop.self_time_us = per_op.get((*key, "forward", lop.name), 0.0)
        for bop in stat.backward_ops:
            bop.self_time_us = per_op.get((*key, "backward", bop.name), 0.0)
    result.lines.sort(key=lambda s: (-(s.self_time_us + s.backward_self_time_us), s.file, s.line))
    placed = sum(report.ns.values())
    totals = result.totals
    busy = (placed + report.unmatched_ns) * us
    totals.self_time_us = totals.self_time_us_min = totals.self_time_us_max = busy
    totals.per_step_self_time_us, totals.step_us = [busy], [busy]
    backward = sum(v.get("backward", 0.0) for v in per.values())
    totals.backward_time_us, totals.forward_time_us = backward, busy - backward
    result.unattributed_us = (report.unmatched_ns + report.unplaced_ns) * us

"""Per-line Neuron device time into an xla result (Trn1), on the core side.

The harness (``harness/xla/device.py``) captured one NTFF per NEFF on the first
measured step and ran ``neuron-explorer view`` on the host; the result lists the
Parquet folders in ``artifacts.neuron_views``. ``fill`` (called by the runner
once the batch is read) fetches each folder when the run was remote, reads it
with ``neuron_profile`` and replaces the result's per-line figures with device
time: clock ``neuron``, per line the union of its instruction intervals (overall
and per engine), the NEFFs of one step added (they run one after another).

Anything that goes wrong (no folder processed on the host, a fetch that fails, a
schema the reader does not know) leaves the host figures as they are and says
why in ``signals.neuron_profile_error`` (a finding) and ``signals.warnings``:
the run is never lost for want of its device profile.
"""

from __future__ import annotations

import posixpath
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from trainium_lens.errors import LensError
from trainium_lens.model.result import (
    EngineTime,
    HloRef,
    LineOp,
    LineStat,
    OpStat,
    Region,
    Result,
    SourceLine,
)
from trainium_lens.traces import neuron_profile as npf

Fetch = Callable[[str, Path], Path]


@dataclass
class _Line:
    self_ns: int = 0
    total_ns: int = 0
    engines: dict[str, int] = field(default_factory=dict)
    per_hlo: dict[str, int] = field(default_factory=dict)
    covered: set[str] = field(default_factory=set)


def fill(result: Result, fetch: Fetch | None = None) -> bool:
    """True when the result now holds device time; False leaves it as it was
    (with the reason in its signals when a device profile was expected)."""
    views = result.artifacts.neuron_views
    if result.backend != "xla" or not views:
        return False
    ready = [v for v in views if v.parquet]
    if not ready:
        reason = next((v.error for v in views if v.error), "no device trace was processed")
        return _keep_host(result, f"no device trace was processed on the host: {reason}")
    local = result.artifacts.location in ("", "local")
    if not local and fetch is None:
        return _keep_host(
            result, f"the device profile is on {result.artifacts.location} and cannot be fetched from here"
        )
    root = (result.artifacts.source_root or "").rstrip("/")
    hlo_lines = {
        i.name: (s.file, i.line or s.line) for s in result.lines for i in s.instructions if i.credited
    }
    try:
        with tempfile.TemporaryDirectory(prefix="trainium-lens-neuron-") as tmp:
            reports = []
            for k, remote in enumerate(v.parquet for v in ready if v.parquet):
                folder = Path(remote) if fetch is None or local else fetch(remote, Path(tmp) / str(k))
                reports.append(npf.line_times(npf.read(folder), hlo_lines, _user(root)))
    except (LensError, OSError, ValueError, TypeError, KeyError) as exc:
        # NeuronProfileError (a schema we do not know) is a ValueError, as are pyarrow's
        # ArrowInvalid (a damaged file); bad values inside the tables raise the others
        text = str(exc).splitlines()[0] if str(exc) else ""
        return _keep_host(
            result,
            text
            if isinstance(exc, (npf.NeuronProfileError, LensError))
            else f"cannot read the device profile: {type(exc).__name__}: {text}",
        )
    _apply(result, reports, root)
    return True


def _user(root: str) -> Callable[[str], bool]:
    def is_user(file: str) -> bool:
        inside = not root or file.startswith(root + "/")
        return inside and not npf.is_library(file[len(root) :] if root else file)

    return is_user


def _rel(file: str, root: str) -> str:
    if root and file.startswith(root + "/"):
        return posixpath.normpath(file[len(root) + 1 :])
    return file


def _keep_host(result: Result, reason: str) -> bool:
    result.signals.neuron_profile_error = reason
    result.signals.warnings.append(
        f"no per-line Neuron device time ({reason}); the figures are {result.clock} host time"
    )
    return False


def _apply(result: Result, reports: list[npf.LineReport], root: str) -> None:
    per_line: dict[tuple[str, int], _Line] = {}
    for report in reports:
        for t in report.lines:
            acc = per_line.setdefault((_rel(t.file, root), t.line), _Line())
            acc.self_ns += t.time_ns
            acc.total_ns += t.total_ns
            for engine, ns in t.engines.items():
                acc.engines[engine] = acc.engines.get(engine, 0) + ns
            for name, ns in t.per_hlo.items():
                acc.per_hlo[name] = acc.per_hlo.get(name, 0) + ns
            acc.covered.update(t.covered)
    credited_at = {name: key for key, acc in per_line.items() for name in acc.per_hlo}
    opcodes = {name: op for report in reports for name, op in report.opcodes.items()}
    host = {(s.file, s.line): s for s in result.lines}
    lines = []
    for key in sorted(set(per_line) | set(host)):
        acc = per_line.get(key, _Line())
        stat = host.get(key) or LineStat(key[0], key[1], 0.0, 0.0, 0.0, 0.0)
        us = acc.self_ns / 1000.0
        stat.self_time_us = stat.self_time_us_min = stat.self_time_us_max = stat.self_time_us_median = us
        stat.step_us = [us]  # one device-profiled step: one sample (the gate says it cannot judge noise)
        stat.total_time_us = max(acc.total_ns, acc.self_ns) / 1000.0
        stat.engines = [EngineTime(e, ns / 1000.0) for e, ns in sorted(acc.engines.items())]
        stat.ops = [
            LineOp(name, 1.0, ns / 1000.0, 0.0, 1.0)
            for name, ns in sorted(acc.per_hlo.items(), key=lambda kv: -kv[1])
        ]
        stat.instructions = [
            HloRef(name, opcode=opcodes.get(name, ""), self_time_us=ns / 1000.0, calls=1.0, line=key[1])
            for name, ns in sorted(acc.per_hlo.items(), key=lambda kv: -kv[1])
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
        lines.append(stat)
    result.lines = lines
    result.ops = sorted(
        (
            OpStat(name, 1.0, ns / 1000.0, ns / 1000.0, 0.0, ns / 1000.0)
            for acc in per_line.values()
            for name, ns in acc.per_hlo.items()
        ),
        key=lambda o: (-o.self_time_us, o.name),
    )
    covers: dict[str, list[SourceLine]] = {}
    for key, acc in per_line.items():
        for name in acc.covered:
            covers.setdefault(name, []).append(SourceLine(*key))
    result.regions = [
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
    busy = sum(r.busy_ns for r in reports) / 1000.0
    totals = result.totals
    totals.self_time_us = totals.self_time_us_min = totals.self_time_us_max = busy
    totals.per_step_self_time_us = [busy]
    totals.step_us = [busy]
    totals.steps = totals.steps or 1  # the device profile is of one step
    result.unattributed_us = sum(r.unattributed_ns for r in reports) / 1000.0
    result.clock = "neuron"
    result.signals.device_time_reported = True
    result.signals.neuron_profile_error = None
    # the host figure stays beside the device one, as on the other backends
    result.signals.warnings.append(
        f"Neuron device time from {len(reports)} device trace(s), one per compiled graph, each of "
        f"the first measured step; self (cpu) columns keep the host time"
    )

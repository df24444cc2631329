"""From torch_xla's capture of the measured steps to the result document.

Shared by the two ways steps are measured on the xla backend: a marked function's
calls (``xla/backend.py``, ``profile_function``) and an unmodified script's own
steps (``script/xla_run.py``). Both scope each measured step with ``xp.Trace``
(its marker, ``STEP_MARKER``, tells the steps apart) inside one
``start_trace``/``stop_trace``, with the backward tags of ``xla/tags.py`` on.
"""

from __future__ import annotations

import os
import statistics
from dataclasses import dataclass
from typing import Any

from trainium_lens.harness.attribution import build
from trainium_lens.harness.events import HarnessError
from trainium_lens.harness.xla import roof, run_warnings
from trainium_lens.harness.xla.attribution import attribute
from trainium_lens.harness.xla.figures import figures
from trainium_lens.harness.xla.trace import write_trace
from trainium_lens.harness.xla.work import add_work
from trainium_lens.harness.xla.xplane import STEP_MARKER, Capture, find_xplanes, read_xspace


@dataclass
class Window:
    """The measured steps, read and attributed."""

    cap: Capture
    att: Any  # XlaAttribution
    fig: dict  # xla/figures.py
    work: dict  # xla/work.py: FLOPs, bytes, HLO buffers per line
    trace: str | None  # the Chrome trace of the executed instructions
    roof: dict | None = None  # xla/roof.py, once the lines' work is known (warnings_of)


def read_window(
    log_dir: str, on_device: bool, relpath: Any, tagger: Any, text: Any, trace_path: str
) -> Window:
    """``on_device``: a Trn1 device capture runs beside this one (its profile carries
    the figures, so a missing host trace costs only the host figures)."""
    planes = find_xplanes(log_dir)
    if not planes and not on_device:
        raise HarnessError("internal", f"torch_xla's profiler wrote no xplane under {log_dir}")
    cap = read_xspace(planes[-1], STEP_MARKER) if planes else Capture()
    starts = sorted(start for name, start, _end in cap.markers if name.startswith(STEP_MARKER))
    att = attribute(cap, starts, relpath, tagger.tag, tagger.optimizer_places, tagger.optimizer_calls)
    fig = figures(att, text)
    work = add_work(fig["lines"], att, cap)
    return Window(cap, att, fig, work, write_trace(trace_path, att, cap))


def device_views(device: Any, out_dir: str) -> list[dict]:
    """Trn1: the device capture's views (``xla/device.py``); an entry with only an
    error when the runtime wrote none (the core side says so in a finding)."""
    if device is None:
        return []
    views = device.process(out_dir)
    if views:
        return views
    return [
        {
            "neff": None,
            "ntff": None,
            "parquet": None,
            "error": f"the Neuron runtime wrote no device trace (NTFF) under {device.inspect_dir}",
        }
    ]


def warnings_of(w: Window, views: list[dict], backend: Any, tagger: Any, name: str) -> list[str]:
    """The run's warnings; measures the roof first (a line faster than the cached one
    measures it again), then names the lines still above it."""
    w.roof = roof.cpu_roof(backend, w.fig["lines"])
    return (
        run_warnings.after_capture(views, w.att, w.cap, backend.device_type, tagger.error)
        + run_warnings.reused_graphs(w.att.graphs, name)
        + roof.above(w.fig["lines"], w.roof)
    )


def document(
    w: Window,
    *,
    run_id: str,
    batch_id: str,
    host: str,
    backend: Any,
    function: dict,
    wall_us: list[float],
    step_wall_us: list[float],
    graphs: list[int],
    tagger: Any,
    compiles_in_active_steps: int,
    recompiles: int,
    warnings: list[str],
    views: list[dict],
    run_dir: str,
    workspace_root: str,
    output: dict,
) -> dict:
    """``wall_us``: the unprofiled reference (plain tracing); ``step_wall_us``: the
    measured steps' own walls (their ratio is the instrumentation's overhead)."""
    att, cap, fig = w.att, w.cap, w.fig
    wall = statistics.median(wall_us) if wall_us else 0.0
    timeline = [
        {
            "file": f,
            "line": ln,
            "windows": build.merge_windows([[a / 1000.0, b / 1000.0] for a, b in spans], 0.0),
        }
        for (f, ln, _fn), spans in sorted(att.windows.items())
    ]
    return build.document(
        run_id=run_id,
        batch_id=batch_id,
        host=host,
        backend="xla",
        clock=backend.clock,
        environment=backend.environment(),
        function=function,
        totals=build.totals(
            self_time_us=fig["self_time_us"],
            self_cpu_us=fig["self_time_us"],
            wall_us=wall_us,
            steps=att.steps,
            per_step=fig["per_step"],
            dispatches=fig["dispatches"],
            forward_time_us=fig["forward_time_us"],
            backward_time_us=fig["backward_time_us"],
            optimizer_time_us=fig["optimizer_time_us"],
        ),
        ops=fig["ops"],
        lines=fig["lines"],
        regions=fig["regions"],
        unattributed_us=fig["unattributed_us"],
        artifacts={
            "location": host,
            "run_dir": os.path.abspath(run_dir),
            "trace": w.trace,
            **backend.artifacts(run_dir),
            "source_root": workspace_root,
            "neuron_views": views,
        },
        timeline=timeline,
        signals={
            "device_time_reported": bool(cap.executed),
            "compiles_in_active_steps": compiles_in_active_steps,
            # graphs compiled after the first calls: the traced graph changed between steps
            "recompiles": recompiles,
            "warnings": warnings,
            "instrumentation_overhead": (statistics.median(step_wall_us) / wall)
            if wall > 0 and step_wall_us
            else None,
            "graphs_per_step": statistics.median(graphs) if graphs else None,
            **tagger.syncs.signals(att.steps),
        },
        output=output,
        buckets=fig["buckets"],
        optimizers=fig["optimizers"],
        **w.work,
        roof=w.roof,
    )

"""The result document of a script's window on the torch.profiler backends: a
marked function's (``attribution/build.py``) with the script's own fields — its
command, steps, detector, reference steps and data waits. ``xla_run.py`` builds
its document from the xla capture and adds the same script fields. ``run`` is the
``session.ScriptRun`` (typed ``Any``: session imports this module)."""

from __future__ import annotations

import os
import statistics
import sys
from typing import Any

from trainium_lens.harness.attribution import build
from trainium_lens.harness.eager.hits import add_hits
from trainium_lens.harness.eager.origin import add_origins
from trainium_lens.harness.script.reference import chosen_steps


def function_of(run: Any, wall: list[float]) -> dict:
    """The result's ``function``: the script and its measured steps."""
    spec = run.spec
    measured = run.last_measured - run.first + 1
    return {
        "file": spec.script_rel or "<script>",
        "name": f"steps {run.first}-{run.last_measured}",
        "line": spec.main_line,
        "marker_line": None,
        "protocol": {"wait": run.first - 1, "warmup": 0, "active": measured, "timing_calls": len(wall)},
        "inputs": None,
        "compare": None,
    }


def profiled_document(run: Any, wall: list[float]) -> dict:
    """The window's result, ``wall`` the unprofiled reference steps timed so far."""
    spec, att = run.spec, run.att
    measured = run.last_measured - run.first + 1
    function = function_of(run, wall)
    used = att.steps
    stability = {
        "steps_wanted": measured,
        "steps_measured": len(run.judged),
        "steps_clean": sum(1 for s in run.judged if s["clean"]),
        "steps_used": used,
        "extra_steps": 0,
        **run.stability_window,
        "calls_per_step": 1,
        "timing_calls": len(wall),
        "timing_clean": len(wall),
    }
    signals = {
        "device_time_reported": True,
        "cpu_fallback_ops": run.signals_raw.get("cpu_fallback_ops", []),
        "compiles_in_active_steps": 0,
        "recompiles": 0,
        "graph_breaks": 0,
        "neuron_rt_inspect_clash": False,
        "warnings": list(run.signals_raw.get("warnings", [])),
        "instrumentation_overhead": None,
    }
    doc = build.result_document(
        build.Profiled(
            run_id=run.run_id,
            batch_id=spec.batch_id,
            host=spec.host,
            backend=run.backend.name,
            clock=run.backend.name,
            environment=run.backend.environment(),
            function=function,
            att=att,
            labels=run.labeler.labels,
            source=run.source,
            wall_us=wall,
            signals=signals,
            artifacts={
                "location": spec.host,
                "run_dir": os.path.abspath(run.run_dir),
                "trace": run.trace,
            },
            output={},
            offset_us=run.offset_us,
            covered=None,
            h2d_calls=run.counts[0],
            labelled_calls=max(1, measured),
            calibration=run.calibration if not run.backend.device_clock else None,
            stability=stability,
        )
    )
    add_hits(doc["lines"], run.labeler.labels, run.counts[1], max(1, measured))
    add_origins(doc["lines"], run.labeler.labels, run.counts[2])
    run.optimizers.attach(doc)  # their trials, timed at the window's end
    run.work.write(doc)  # FLOPs, bytes, memory of the step after the window (work.py)
    add_script_fields(run, doc)
    return doc


def add_script_fields(run: Any, doc: dict) -> None:
    """What a script's result adds to a function's: its command, steps, data waits."""
    spec = run.spec
    doc["library_files"] = [
        {"file": f, "path": p}
        for f, p in sorted(run.user.library_files.items())
        if any(line["file"] == f for line in doc["lines"])
    ]
    before, after = run.reference_steps()
    doc["script"] = {
        "command": list(spec.command),
        "launcher": spec.launcher,
        "steps": [run.first, run.last_measured],
        "profiled_steps": [run.first, run.window_last],
        "detector": run.detector_name or "",
        "reference_before": len(before),
        "reference_after": len(after),
    }
    doc["script"].update(framework_fields(run.samples))
    keep = chosen_steps([k for k, _ in run.before], [k for k, _ in run.after], run.window_last)
    waits = [w for k, w in run.data_waits.items() if k in keep]  # the wall's own steps
    if run.data_site is not None and waits:
        file, line = run.data_site
        file = _shown(file, os.path.abspath(run.spec.workspace_root))
        doc["script"].update(data_wait_us=statistics.median(waits), data_file=file, data_line=line)


def framework_fields(samples: list[dict]) -> dict:
    """What a framework said of the window's steps (``frameworks.py``): its own step
    numbers, the micro-batches each step held, the updates it skipped (fp16 inf/NaN)."""
    numbers = [s["framework_step"] for s in samples if s.get("framework_step") is not None]
    micro = [s["micro_batches"] for s in samples if s.get("micro_batches")]
    out: dict = {}
    if numbers:
        out["framework_steps"] = [numbers[0], numbers[-1]]
    if micro:
        out["micro_batches"] = statistics.median_low(micro)
        out["skipped_steps"] = sum(1 for s in samples if s.get("skipped"))
    return out


def _shown(file: str, root: str) -> str:
    """A file as the result names it: relative to the workspace, else to the
    ``sys.path`` entry it was imported from (a framework's loader:
    ``accelerate/data_loader.py``), else as it is."""
    path = os.path.abspath(file)
    for base in [root] + sorted((os.path.abspath(p) for p in sys.path if p), key=len, reverse=True):
        if path.startswith(base + os.sep):
            return os.path.relpath(path, base).replace(os.sep, "/")
    return file

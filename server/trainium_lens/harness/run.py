"""Profile one marked function: inputs → compile (first calls) → profiled steps
(labelled) → attribution → export → unprofiled timing → result dict."""

from __future__ import annotations

import os
import statistics
import time
from datetime import datetime, timezone
from typing import Any

import torch

from . import build
from .attribution import attribute
from .compiled import CompileWatch
from .dist import align_step
from .events import EventStream, HarnessError
from .lines import LineLabeler
from .loader import UserCode, call_inputs, required_params
from .markers import Marked
from .spec import Spec


def invoke(fn: Any, args: tuple, kwargs: dict) -> Any:
    """The one place the harness calls user code: line labels stop at this frame."""
    return fn(*args, **kwargs)


class Session:
    """State shared by the functions of one batch."""

    def __init__(self, spec: Spec, events: EventStream, backend: Any, module: Any,
                 user: UserCode, rel_file: str):
        self.spec = spec
        self.events = events
        self.backend = backend
        self.module = module
        self.user = user
        self.rel_file = rel_file
        self.watch = CompileWatch(user)
        self.watch.install()
        self.labeler = LineLabeler(user, invoke.__code__, device_backend=backend.device != "cpu")
        self.inputs: dict[str, tuple[tuple, dict]] = {}
        self.reference: tuple[str, Any] | None = None  # (function, first output tensor)
        self.source = build.SourceText(user.root)


def _to_device(value: Any, device: str) -> Any:
    if isinstance(value, torch.Tensor) and value.device.type == "cpu" and device != "cpu":
        return value.to(device)
    return value


def _inputs(s: Session, marked: Marked, fn: Any) -> tuple[tuple, dict]:
    name = marked.options.get("inputs")
    if not name:
        missing = required_params(fn)
        if missing:
            raise HarnessError("inputs", f"{marked.name} needs arguments ({', '.join(missing)}): "
                               f"add inputs=NAME to its marker, naming a function that returns "
                               f"them as a tuple or dict", s.rel_file, marked.marker_line)
        return (), {}
    if name not in s.inputs:  # one call per inputs function: variants share their inputs
        torch.manual_seed(0)
        args, kwargs = call_inputs(s.module, name, s.rel_file, marked.name, s.user)
        dev = s.backend.device
        s.inputs[name] = (tuple(_to_device(a, dev) for a in args),
                          {k: _to_device(v, dev) for k, v in kwargs.items()})
    return s.inputs[name]


def _call(s: Session, fn: Any, args: tuple, kwargs: dict, what: str) -> Any:
    try:
        return invoke(fn, args, kwargs)
    except Exception as exc:
        raise s.user.error_from(exc, "user_code", what) from None


def _first_tensor(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        for item in value:
            found = _first_tensor(item)
            if found is not None:
                return found
    return None


def _output(s: Session, name: str, value: Any) -> dict:
    tensor = _first_tensor(value)
    if tensor is None:
        return {}
    tensor = tensor.detach()
    out = {"dtype": str(tensor.dtype).replace("torch.", ""), "shape": list(tensor.shape)}
    if tensor.numel() and tensor.dtype != torch.bool:
        out["max_abs"] = float(tensor.abs().max().to("cpu").double().item())
    if s.reference is None:
        s.reference = (name, tensor.to("cpu", copy=True))
        out.update(reference=name, max_abs_diff=0.0)
        return out
    ref_name, ref = s.reference
    out["reference"] = ref_name
    if list(ref.shape) == out["shape"]:
        diff = (tensor.to("cpu").double() - ref.double()).abs()
        out["max_abs_diff"] = float(diff.max().item()) if diff.numel() else 0.0
    return out


def _timed(s: Session, fn: Any, args: tuple, kwargs: dict, calls: int, labelled: bool) -> list[float]:
    times = []
    sync = s.backend.sync
    for _ in range(calls):
        t0 = time.perf_counter()
        if labelled:
            with s.labeler:
                invoke(fn, args, kwargs)
        else:
            invoke(fn, args, kwargs)
        sync()
        times.append((time.perf_counter() - t0) * 1e6)
    return times


def profile_function(s: Session, marked: Marked, index: int, protocol: dict) -> dict:
    ev, name, spec = s.events, marked.name, s.spec
    run_id = f"{spec.batch_id}-{index}"
    fn = getattr(s.module, name, None)
    if not callable(fn):
        raise HarnessError("unknown_function", f"{name} is marked but is not a function at "
                           f"import time", s.rel_file, marked.def_line)
    ev.stage("inputs", name, "preparing inputs")
    args, kwargs = _inputs(s, marked, fn)

    ev.stage("compile", name, "first calls (compiles land here, outside the measured steps)")
    s.watch.install()
    start = s.watch.counters()
    first = _call(s, fn, args, kwargs, name)
    s.backend.sync()
    s.watch.install()
    s.labeler.hook.refresh()
    s.labeler.hook.arm_if_called(lambda: _call(s, fn, args, kwargs, name))
    s.backend.sync()
    output = _output(s, name, first)
    def_label = s.labeler.label(s.rel_file, marked.def_line, name)

    # CPU clock: every measured step is followed by the same call unlabelled; CPU
    # times come from those (labels perturb the ops' own CPU time, see
    # attribution.attribute). Device clocks are not perturbed by host labels.
    paired = not s.backend.device_clock
    unwatched = protocol["wait"] + protocol["warmup"]
    active = protocol["active"] * (2 if paired else 1)
    total = unwatched + active
    schedule = torch.profiler.schedule(wait=protocol["wait"], warmup=protocol["warmup"],
                                       active=active, repeat=1)
    at_active = s.watch.counters()
    s.labeler.h2d.clear()
    labelled_calls = 0
    s.backend.start_capture()
    try:
        with torch.profiler.profile(activities=s.backend.activities(), schedule=schedule,
                                    **s.backend.profiler_kwargs(spec.run_dir, run_id)) as prof:
            for step in range(total):
                ev.stage("profile", name, f"step {step + 1} of {total}", step=step + 1, of=total)
                if step == unwatched:
                    at_active = s.watch.counters()
                align_step()  # torchrun jobs: every rank starts the step together
                try:
                    if paired and (step - unwatched) % 2:
                        invoke(fn, args, kwargs)
                    else:
                        labelled_calls += 1
                        with s.labeler:
                            invoke(fn, args, kwargs)
                    s.backend.sync()
                except Exception as exc:
                    raise s.user.error_from(exc, "user_code", name) from None
                prof.step()
    finally:
        backend_signals = s.backend.stop_capture()
    after = s.watch.counters()
    h2d_calls = dict(s.labeler.h2d)

    ev.stage("export", name, "attributing op time to lines")
    events = prof.events()
    cpu_type = torch.autograd.DeviceType.CPU
    labels = s.labeler.labels
    device_clock = s.backend.device_clock
    att = attribute(events, labels, device_clock, def_label, cpu_type, paired=paired)
    clock = s.backend.name
    device_reported = True
    if device_clock and not any(v[4] > 0 for v in att.ops.values()):
        # no device time at all: say so and show CPU time under its own name
        device_reported = False
        clock = "cpu"
        att = attribute(events, labels, False, def_label, cpu_type)
        ev.warning(f"{name}: the {s.backend.name} profiler reported no device time; "
                   f"figures for this run are CPU time (clock: cpu)")
    if att.mismatched_steps:
        ev.warning(f"{name}: {att.mismatched_steps} of {att.steps} steps ran different ops "
                   f"with and without line labels; their CPU times include the labels' overhead")
    trace = os.path.join(spec.run_dir, f"{run_id}.trace.json")
    try:
        prof.export_chrome_trace(trace)
    except Exception as exc:
        ev.warning(f"{name}: could not write the Chrome trace: {exc}")
        trace = None
    start_ns = None
    try:
        start_ns = int(prof.profiler.kineto_results.trace_start_ns())
    except Exception:
        pass
    offset = build.trace_offset_us(trace, start_ns)
    figures = build.lines_and_ops(att, labels, s.source)

    ev.stage("timing", name, f"{protocol['timing_calls']} unprofiled calls")
    try:
        plain = _timed(s, fn, args, kwargs, protocol["timing_calls"], labelled=False)
        labelled = _timed(s, fn, args, kwargs, max(3, min(10, protocol["timing_calls"])), True)
    except Exception as exc:
        raise s.user.error_from(exc, "user_code", name) from None
    wall = statistics.median(plain)
    overhead = statistics.median(labelled) / wall if wall > 0 else None

    regions = []
    for (region, key), (calls, t) in sorted(att.regions.items(), key=lambda kv: -kv[1][1]):
        file, line, _fn = labels.get(key, (s.rel_file, marked.def_line, name))
        graph = s.watch.covered(region) or {}
        regions.append({
            "name": region, "file": file, "line": line,
            "self_time_us": t / max(att.steps, 1), "calls": calls / max(att.steps, 1),
            "covered_lines": [{"file": f, "line": ln} for f, ln in graph.get("lines", [])],
            "fx_nodes": graph.get("nodes", 0),
        })
    timeline = []
    for key, windows in att.windows.items():
        file, line, _fn = labels[key]
        timeline.append({"file": file, "line": line, "windows": build.merge_windows(windows, offset)})
    timeline.sort(key=lambda t: (t["file"], t["line"]))

    h2d = []
    for key, calls in sorted(h2d_calls.items()):
        file, line, _fn = labels[key]
        copy_time = sum(v[1] for (k, op), v in att.line_ops.items()
                        if k == key and op in ("aten::copy_", "aten::_to_copy"))
        h2d.append({"name": f"{file}:{line}", "calls": calls / max(labelled_calls, 1),
                    "self_time_us": copy_time / max(att.steps, 1)})
    warnings = list(backend_signals.get("warnings", []))
    if s.watch.problem:
        warnings.append(s.watch.problem)
    for w in warnings:
        ev.warning(f"{name}: {w}")
    signals = {
        "device_time_reported": device_reported,
        "cpu_fallback_ops": backend_signals.get("cpu_fallback_ops", []),
        "h2d_copies": h2d,
        "h2d_copy_lines": [{"file": h["name"].rsplit(":", 1)[0], "line": int(h["name"].rsplit(":", 1)[1])}
                           for h in h2d],
        "compiles_in_active_steps": after["compiles"] - at_active["compiles"],
        "recompiles": s.watch.recompiles(since=start["compiles"]),
        "graph_breaks": after["graph_breaks"] - start["graph_breaks"],
        "neuron_rt_inspect_clash": bool(backend_signals.get("neuron_rt_inspect_clash", False)),
        "warnings": warnings,
        "instrumentation_overhead": overhead,
    }
    per_step = figures["per_step"]
    artifacts = {"location": spec.host, "run_dir": os.path.abspath(spec.run_dir), "trace": trace}
    artifacts.update(s.backend.artifacts(spec.run_dir))
    return {
        "schema_version": 1,
        "run_id": run_id,
        "batch_id": spec.batch_id,
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "backend": s.backend.name,
        "clock": clock,
        "host": spec.host,
        "environment": s.backend.environment(),
        "function": {"file": s.rel_file, "name": name, "line": marked.def_line,
                     "marker_line": marked.marker_line, "protocol": dict(protocol)},
        "totals": {
            "self_time_us": figures["self_time_us"], "self_cpu_us": figures["self_cpu_us"],
            "wall_us_median": wall, "wall_us_min": min(plain), "wall_us_max": max(plain),
            "steps": att.steps,
            "self_time_us_min": min(per_step) if per_step else 0.0,
            "self_time_us_max": max(per_step) if per_step else 0.0,
            "dispatches": figures["dispatches"], "per_step_self_time_us": per_step,
        },
        "ops": figures["ops"],
        "lines": figures["lines"],
        "regions": regions,
        "unattributed_us": figures["unattributed_us"],
        "findings": [],
        "artifacts": artifacts,
        "timeline": timeline,
        "signals": signals,
        "output": output,
    }

"""Profile one marked function: inputs → compile (first calls) → calibrate (once
per run, cpu clock) → settle → profiled steps (labelled, more while the host
disturbs them) → attribution → export → unprofiled timing → result dict."""

from __future__ import annotations

import os
from typing import Any

import torch

from trainium_lens.harness.attribution import bounded, build
from trainium_lens.harness.attribution.trace_tags import export_tagged
from trainium_lens.harness.attribution.tree import attribute
from trainium_lens.harness.eager import calibration_store, measure, steady
from trainium_lens.harness.eager.compiled import CompileWatch
from trainium_lens.harness.eager.hits import add_hits
from trainium_lens.harness.eager.lines import LineLabeler
from trainium_lens.harness.eager.optim_trials import OptimizerWatch
from trainium_lens.harness.eager.optim_trials import attach as attach_trials
from trainium_lens.harness.eager.optim_trials import measure as measure_optimizers
from trainium_lens.harness.eager.origin import add_origins
from trainium_lens.harness.events import EventStream
from trainium_lens.harness.job.include_hooks import IncludeHooks
from trainium_lens.harness.job.loader import UserCode
from trainium_lens.harness.markers import Marked, paired_seconds
from trainium_lens.harness.runtime.call import (
    function_record,
    inputs,
    invoke,
    marked_function,
    output,
    variant_key,
)
from trainium_lens.harness.runtime.host import HostWindow, RunQueueDelay
from trainium_lens.harness.spec import Spec
from trainium_lens.harness.work.attach import add_work


class Session:
    """State shared by the functions of one batch."""

    def __init__(
        self,
        spec: Spec,
        events: EventStream,
        backend: Any,
        module: Any,
        user: UserCode,
        rel_file: str,
        watch: CompileWatch | None = None,  # a kernel's one watch: it patches dynamo once per process
    ):
        self.spec = spec
        self.events = events
        self.backend = backend
        self.module = module
        self.user = user
        self.rel_file = rel_file
        self.watch = watch or CompileWatch(user)
        self.watch.install()
        self.labeler = LineLabeler(user, invoke.__code__, device_backend=backend.device != "cpu")
        self.include_hooks = IncludeHooks(user, self.labeler.mode)  # --include: inside F.* too
        self.optimizers = OptimizerWatch(user)  # optimizers stepped in the first call (optim_trials.py)
        self.inputs: dict[str, tuple[tuple, dict]] = {}
        self.pristine: dict[str, Any] = {}  # call.inputs: compared variants start alike
        # function -> (variant group, call, calls per sample, timing calls, paired_s): paired.py
        self.timed: dict[str, tuple[str, Any, int, int, int]] = {}
        # per group of variants (see variant_key): (function, first output tensor)
        self.references: dict[str, tuple[str, Any]] = {}
        self.source = build.SourceText(user.root, user.abspath)
        self.run_delay = RunQueueDelay()
        self._calibration: dict | None = None
        self._calibrated = False

    def calibration(self) -> dict | None:
        """The cpu clock's calibration, measured once per run (calibrate.py) or read
        from the host's shared file (calibration_store.py); None on device clocks,
        which are not calibrated."""
        if not self._calibrated:
            self._calibrated = True
            if not self.backend.device_clock:
                self._calibration = calibration_store.for_run(
                    torch, self.backend, self, self.spec.run_dir, self.events
                )
        return self._calibration


def profile_function(s: Session, marked: Marked, index: int, protocol: dict) -> dict:
    """inputs → first calls → profiled steps → attribution → trace → timing → result."""
    fn = marked_function(s, marked)
    s.events.stage("inputs", marked.name, "preparing inputs")
    args, kwargs = inputs(s, marked, fn)
    return profile_call(s, marked, index, protocol, Call(s, fn, args, kwargs, marked.name))


def profile_call(s: Session, marked: Marked, index: int, protocol: dict, call: Call) -> dict:
    """The protocol on a function already found with its inputs (a marked function, or
    a notebook cell in its own kernel: eager/in_process.py)."""
    run_id = f"{s.spec.batch_id}-{index}"
    first_output, compiles_from = _first_calls(
        call, lambda first: output(s, marked.name, first, variant_key(marked))
    )
    calibration = s.calibration()
    window = HostWindow().start()
    s.events.stage("settle", marked.name, "unprofiled calls until the call time is steady")
    compiles = s.watch.counters()["compiles"]
    settled = steady.settle(
        lambda: measure.timed_once(call), protocol["wait"], lambda: s.watch.counters()["compiles"] > compiles
    )
    per_step = steady.calls_per_step(settled, s.backend.device_clock)
    # cpu clock: the wall's speed just before the steps, held against the timing calls'
    # after them (analysis/reconcile.py: the same calls at two speeds)
    before = None if s.backend.device_clock else measure.time_before(call, per_step)
    steps = measure.profile_steps(call, protocol, run_id, per_step)
    att, clock, device_reported = _attribute(call, steps, marked, calibration)
    trace, offset = _export_trace(call, steps.prof, run_id, att)
    wall, overhead, timing = measure.time_unprofiled(call, protocol, per_step)
    unfitted_ops = None
    if clock == "cpu" and calibration is not None:
        # the ops with the calibration as read: what the reconciliation holds against the wall
        unfitted_ops = build.lines_and_ops(att, s.labeler.labels, s.source)["self_time_us"]
        att, calibration = _within_wall(call, steps, marked, calibration, att, wall, timing, before)
    span = timing.pop("device_span_us", None)
    trials = _optimizer_trials(call)
    signals = _signals(call, steps, compiles_from, device_reported, overhead)
    stability = {
        **steps.plan.evidence(),
        **window.stop(),
        **timing,
        "settle_calls": len(settled),
        "wall_before_us": before,
        "calls_per_step": per_step,
        "steps_used": att.steps,
    }
    if not s.backend.device_clock:
        stability["threads"] = torch.get_num_threads()
    artifacts = {"location": s.spec.host, "run_dir": os.path.abspath(s.spec.run_dir), "trace": trace}
    artifacts.update(s.backend.artifacts(s.spec.run_dir))
    if not device_reported and s.backend.device_profile:
        # key_averages() had no device time: the backend's device profile may (Neuron)
        s.events.stage("export", marked.name, "processing the device profile (neuron-explorer view)")
        # the session profile holds every recorded step (extra ones too) of every call
        calls = len(steps.plan.samples) * steps.per_step
        views = s.backend.device_views(s.spec.run_dir, run_id, calls)
        artifacts.update(views, source_root=s.spec.workspace_root)
    doc = build.result_document(
        build.Profiled(
            run_id=run_id,
            batch_id=s.spec.batch_id,
            host=s.spec.host,
            backend=s.backend.name,
            clock=clock,
            environment=s.backend.environment(),
            function=function_record(s, marked, protocol),
            att=att,
            labels=s.labeler.labels,
            source=s.source,
            wall_us=wall,
            signals=signals,
            artifacts=artifacts,
            output=first_output,
            offset_us=offset,
            covered=s.watch.covered,
            h2d_calls=steps.h2d_calls,
            labelled_calls=steps.labelled_calls,
            calibration=calibration if clock == "cpu" and s.backend.name == "cpu" else None,
            stability=stability,
            device_span_us=span,
            unfitted_ops_us=unfitted_ops,
        )
    )
    add_hits(doc["lines"], s.labeler.labels, steps.hits, steps.labelled_calls)  # hits.py
    add_origins(doc["lines"], s.labeler.labels, steps.origins)  # origin.py
    attach_trials(doc["optimizers"], trials)  # optim_trials.py
    doc["library_files"] = [
        {"file": f, "path": p}
        for f, p in sorted(s.user.library_files.items())
        if any(line["file"] == f for line in doc["lines"])
    ]
    # FLOPs, bytes, memory: one more call, after everything timed (work/step.py says why)
    add_work(doc, s, call, s.labeler.label(s.rel_file, marked.def_line, marked.name))
    bound = paired_seconds(marked.options)  # checked by spec.protocol_for
    s.timed[marked.name] = (variant_key(marked), call, max(1, per_step), protocol["timing_calls"], bound)
    return doc


class Call:
    """The profiled function with its inputs, called the one way the harness calls it."""

    def __init__(self, s: Session, fn: Any, args: tuple, kwargs: dict, name: str):
        self.s, self.fn, self.args, self.kwargs, self.name = s, fn, args, kwargs, name

    def __call__(self, labelled: bool = False) -> Any:
        try:
            if labelled:
                with self.s.labeler:
                    return invoke(self.fn, self.args, self.kwargs)
            return invoke(self.fn, self.args, self.kwargs)
        except Exception as exc:
            raise self.s.user.error_from(exc, "user_code", self.name) from None


def _first_calls(call: Call, read: Any) -> tuple[Any, dict]:
    """Two unprofiled calls: compiles land here; the second arms the compiled-call hook.
    ``read`` takes what the first returned at once: it can be the live parameters
    (``p.detach()``), which every later call updates."""
    s = call.s
    s.events.stage("compile", call.name, "first calls (compiles land here, outside the measured steps)")
    s.watch.install()
    start = s.watch.counters()
    with s.optimizers.watch():  # which optimizers step, for optim_trials.measure
        first = call()
    s.backend.sync()
    first = read(first)
    s.watch.install()
    s.labeler.hook.refresh()
    s.include_hooks.refresh()
    s.labeler.hook.arm_if_called(call)
    s.backend.sync()
    return first, start


def _walk(
    call: Call,
    steps: measure.Steps,
    marked: Marked,
    calibration: dict | None,
    device_clock: bool,
    paired: bool = True,
) -> Any:
    """One attribution pass over the profiled steps (tree.py)."""
    s = call.s
    return attribute(
        steps.prof.events(),
        s.labeler.labels,
        device_clock,
        s.labeler.label(s.rel_file, marked.def_line, call.name),
        torch.autograd.DeviceType.CPU,
        paired=steps.paired and paired,
        record_events=True,
        keep=steps.plan.keep(),
        calls_per_step=steps.per_step,
        per_depth_us=(calibration or {}).get("per_depth_us", 0.0),
        per_top_us=(calibration or {}).get("per_top_us"),
        gap_factor=(calibration or {}).get("gap_factor", 1.0),
    )


def _attribute(
    call: Call, steps: measure.Steps, marked: Marked, calibration: dict | None
) -> tuple[Any, str, bool]:
    s, name = call.s, call.name
    s.events.stage("export", name, "attributing op time to lines")
    att = _walk(call, steps, marked, calibration, s.backend.device_clock)
    clock, device_reported = s.backend.name, True
    if s.backend.device_clock and not any(f.device > 0 for f in att.ops.values()):
        # no device time at all: say so and show CPU time under its own name; not
        # calibrated (a device backend's host figures)
        device_reported, clock = False, "cpu"
        att = _walk(call, steps, marked, None, False, paired=False)
        s.events.warning(
            f"{name}: the {s.backend.name} profiler reported no device time; "
            + (
                "per-line device time comes from the device profile, if it can be read"
                if s.backend.device_profile
                else "figures for this run are CPU time (clock: cpu)"
            )
        )
    if att.mismatched_steps:
        s.events.warning(
            f"{name}: {att.mismatched_steps} of {att.steps} steps ran different ops "
            f"with and without line labels; their CPU times include the labels' overhead"
        )
    return att, clock, device_reported


def _within_wall(
    call: Call,
    steps: measure.Steps,
    marked: Marked,
    calibration: dict,
    att: Any,
    wall: list[float],
    timing: dict,
    before: float | None,
) -> tuple[Any, dict]:
    """The attribution again, with the calibration the unprofiled wall bounds: only
    the share it leaves room for when the calibration took more
    (``build.calibration_kept``), more of it when the ops alone read above the wall on
    a run that held one speed (``build.calibration_raised``). The per-level cost that
    subtracts that much is found by ``bounded.per_level_cost``."""
    n = max(att.steps, 1) * max(att.calls_per_step, 1)
    subtracted = att.calibrated_us / n
    figures = build.lines_and_ops(att, call.s.labeler.labels, call.s.source)
    read = calibration["per_depth_us"]

    def walk(cost: float) -> tuple[Any, float]:
        again = _walk(call, steps, marked, {**calibration, "per_depth_us": cost}, False)
        return again, again.calibrated_us / n

    kept = build.calibration_kept(figures, subtracted, wall, timing)
    if kept < 1.0:
        att, used = bounded.per_level_cost(walk, (0.0, 0.0), (read, subtracted), kept * subtracted)
    else:
        raised = build.calibration_raised(figures, subtracted, wall, timing, before)
        if raised <= 1.0:
            return att, calibration
        top = build.RAISE_MAX * read
        most, at_most = walk(top)
        aim = raised * subtracted
        if at_most <= aim:  # the cap, or ops that settle at 0 before the aim: what it took
            att, used = most, top
        else:
            att, used = bounded.per_level_cost(walk, (read, subtracted), (top, at_most), aim)
    return att, {**calibration, "per_depth_us": round(used, 4), "per_depth_read_us": read}


def _export_trace(call: Call, prof: Any, run_id: str, att: Any) -> tuple[str | None, float]:
    """The Chrome trace, every op event tagged with its attributed line (trace_tags)."""
    s = call.s
    path = os.path.join(s.spec.run_dir, f"{run_id}.trace.json")
    trace: str | None = path
    try:
        # PyTorch's thread counter on each op: TorchNeuron's op map is keyed by it
        export_tagged(prof, path, att, s.labeler.labels, threads=s.backend.name == "neuron")
    except Exception as exc:
        s.events.warning(f"{call.name}: could not write the Chrome trace: {exc}")
        trace = None
    start_ns = None
    try:
        start_ns = int(prof.profiler.kineto_results.trace_start_ns())
    except Exception:
        pass
    return trace, build.trace_offset_us(trace, start_ns)


def _optimizer_trials(call: Call) -> list[dict]:
    """The optimizers' step implementations timed on copies (optim_trials.py)."""
    s = call.s
    if not s.optimizers.seen:
        return []
    s.events.stage("timing", call.name, "optimizer step: loop, foreach and fused timed on copies")
    return measure_optimizers(s.optimizers, s.backend.sync, delay=s.run_delay.read_us)


def _signals(
    call: Call, steps: measure.Steps, start: dict, device_reported: bool, overhead: float | None
) -> dict:
    """Raw observations for the analysis (h2d copies are added by the builder)."""
    s = call.s
    warnings = list(steps.backend_signals.get("warnings", []))
    if s.watch.problem:
        warnings.append(s.watch.problem)
    for w in warnings:
        s.events.warning(f"{call.name}: {w}")
    return {
        "device_time_reported": device_reported,
        "cpu_fallback_ops": steps.backend_signals.get("cpu_fallback_ops", []),
        "compiles_in_active_steps": steps.after["compiles"] - steps.at_active["compiles"],
        "recompiles": s.watch.recompiles(since=start["compiles"]),
        "graph_breaks": steps.after["graph_breaks"] - start["graph_breaks"],
        "neuron_rt_inspect_clash": bool(steps.backend_signals.get("neuron_rt_inspect_clash", False)),
        "warnings": warnings,
        "instrumentation_overhead": overhead,
    }

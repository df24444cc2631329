"""Findings only an xla run can have: what is true of a compiled graph.

An xla step is traced into one graph, compiled once and run; per-op dispatch
counts and eager fusion advice do not apply (``analyze.py`` skips them for
xla). What does cost an xla step, from the backend's signals
(``torch_xla.debug.metrics`` over the measured steps, ``harness/xla/tags.py``):

* a graph compiled in the measured steps (every step: the graph never settles);
* a host–device sync inside the step (``.item()``, ``print(tensor)``, ``if
  tensor:``): the graph is cut there and the host waits for the device — on the
  line that did it;
* more than one graph per step with no such line (``torch_xla.sync()`` or
  ``xm.mark_step()`` inside the function);
* ATen ops torch-xla ran on the CPU (its ``aten::*`` fallback counters), on the
  line that called them;
* Trn1: a device profile that gave no per-line time.
"""

from __future__ import annotations

from trainium_lens.model.result import Finding, HostSync, Result

# Ops whose output shape depends on the data: on XLA they fall back or recompile.
DYNAMIC_SHAPE_OPS = frozenset({"nonzero", "masked_select", "unique", "_unique2", "unique_consecutive"})


def xla_findings(result: Result) -> list[Finding]:
    if result.backend != "xla":
        return []
    return (
        no_instructions(result)
        + compiles(result)
        + host_syncs(result)
        + graphs_per_step(result)
        + fallbacks(result)
        + no_device_profile(result)
    )


def no_instructions(result: Result) -> list[Finding]:
    """The torch_xla profiler recorded no executed HLO instruction."""
    if result.signals.device_time_reported:
        return []
    return [
        Finding(
            kind="xla_no_instructions",
            severity="warning",
            file=result.function.file,
            line=result.function.line,
            message="The torch_xla profiler recorded no executed HLO instruction: no per-line time. "
            "Either the function returned nothing that needed computing (a lazy tensor "
            "nobody holds is never run), or this PJRT device reports no per-instruction events.",
            fix="return the tensors the step computes; on Trn1 read the Neuron device profile "
            "(neuron-explorer) instead",
        )
    ]


def _causes(result: Result) -> str:
    """The lines that most likely made the graph change, for a compile finding."""
    lines = sorted({s.line for s in result.signals.host_syncs} | _dynamic_lines(result))
    if not lines:
        return ""
    return f" Lines that cut the graph or have data-dependent shapes: {', '.join(map(str, lines))}."


def _dynamic_lines(result: Result) -> set[int]:
    return {f.line for f in result.signals.xla_fallbacks if _op(f.op) in DYNAMIC_SHAPE_OPS and f.line > 0}


def compiles(result: Result) -> list[Finding]:
    """Graphs compiled in the measured steps: every step (the traced graph changes
    each call), or now and then (a shape or value that changes between steps)."""
    steps = result.totals.steps
    n = result.signals.compiles_in_active_steps
    if steps <= 0 or n <= 0:
        return []
    every = n >= steps
    return [
        Finding(
            kind="xla_recompile_every_step" if every else "xla_compile_in_steps",
            severity="warning",
            file=result.function.file,
            line=result.function.line,
            message=(
                f"torch_xla compiled {n} graphs in {steps} measured steps: the traced graph changes "
                f"every call (a shape that changes, a Python number baked in as a constant, or "
                f".item()/print() cutting the graph), so every step compiles."
                if every
                else f"torch_xla compiled {n} graph{'s' if n != 1 else ''} during the {steps} measured "
                f"steps: the traced graph changed between steps (a new shape or constant), and "
                f"those steps' figures include a compile."
            )
            + _causes(result),
            fix="keep shapes fixed (pad or bucket), pass changing numbers as tensors, and keep "
            ".item()/print() out of the step; PT_XLA_DEBUG_LEVEL=2 says why each graph differs",
        )
    ]


def _what(sync: HostSync) -> str:
    names = {
        "item": ".item()",
        "__format__": "formatting a tensor (f-string)",
        "__repr__": "printing a tensor",
        "__str__": "printing a tensor",
        "__bool__": "a tensor used as a condition",
        "tolist": ".tolist()",
        "cpu": ".cpu()",
        "numpy": ".numpy()",
        "to": ".to('cpu')",
    }
    return ", ".join(names.get(w, f"{w}()") for w in sync.what[:3]) or "a call"


def host_syncs(result: Result) -> list[Finding]:
    """A line whose call made torch-xla run the graph so far, or copy to the host,
    in the middle of the step (a line that fell back to the CPU says so itself)."""
    fallback_lines = {(f.file, f.line) for f in result.signals.xla_fallbacks}
    found = []
    for sync in result.signals.host_syncs:
        if (sync.file, sync.line) in fallback_lines:
            continue
        if not sync.graphs:
            # the value was computed already (read after torch_xla.sync()): no graph is cut,
            # but the host waits for the device, so tracing the next step cannot overlap it
            message = (
                f"Host–device sync in the step: {_what(sync)} here copies a value to the host "
                f"({sync.calls:g} per step) and waits for the device to finish the graph that "
                f"computes it, so the host cannot trace the next step while the device runs this one."
            )
            fix = "read it every N steps, or in xm.add_step_closure (it runs when the value is ready)"
        else:
            graphs = f", running {sync.graphs:g} graph{'s' if sync.graphs != 1 else ''}"
            message = (
                f"Host–device sync in the step: {_what(sync)} here makes torch-xla stop "
                f"tracing, execute what the step has built so far and copy the value to the host "
                f"({sync.calls:g} per step{graphs}); the rest of the step becomes another graph "
                f"and the host waits for the device in between."
            )
            fix = (
                "keep the value on the device (return it); to log it, read it after the step "
                "(xm.add_step_closure, or every N steps after torch_xla.sync())"
            )
        found.append(
            Finding(
                kind="xla_host_sync",
                severity="warning",
                file=sync.file,
                line=sync.line,
                message=message,
                fix=fix,
            )
        )
    return found


def graphs_per_step(result: Result) -> list[Finding]:
    """More than one graph per step with no line that cut it (an explicit sync)."""
    graphs = result.signals.graphs_per_step
    if not graphs or graphs <= 1 or result.signals.host_syncs or result.signals.xla_fallbacks:
        return []
    return [
        Finding(
            kind="xla_graphs_per_step",
            severity="warning",
            file=result.function.file,
            line=result.function.line,
            message=f"Each step runs as {graphs:g} graphs: something inside the function cuts the "
            f"graph (torch_xla.sync() or xm.mark_step() in the step), so the compiler cannot "
            f"optimize across the cut and the host waits for the device at each one.",
            fix="call torch_xla.sync() once per step, after the optimizer step (outside this function "
            "when it is the training step)",
        )
    ]


def _op(name: str) -> str:
    return name.split("::", 1)[-1].split(".", 1)[0]


def fallbacks(result: Result) -> list[Finding]:
    """ATen ops torch-xla ran on the CPU: the graph is cut before each, its inputs
    go to the host and the result comes back."""
    found = []
    for f in result.signals.xla_fallbacks:
        op = _op(f.op)
        dynamic = op in DYNAMIC_SHAPE_OPS
        why = (
            "its output shape depends on the data, which a compiled graph cannot have"
            if dynamic
            else "torch-xla has no lowering for it"
        )
        found.append(
            Finding(
                kind="xla_cpu_fallback",
                severity="warning",
                file=f.file if f.line > 0 else result.function.file,
                line=f.line if f.line > 0 else result.function.line,
                message=f"{f.op} ran on the CPU ({f.calls:g} per step): {why}. torch-xla cuts the "
                f"graph before it, copies its inputs to the host and the result back.",
                fix=(
                    "keep shapes static: a mask with torch.where (or a fixed-size topk) instead of "
                    "boolean indexing or nonzero"
                    if dynamic
                    else "use an op torch-xla lowers; PT_XLA_DEBUG_LEVEL=1 lists each fallback"
                ),
            )
        )
    return found


def no_device_profile(result: Result) -> list[Finding]:
    """Trn1: a device profile was captured (or expected) but gave no per-line time."""
    reason = result.signals.neuron_profile_error
    if not reason:
        return []
    return [
        Finding(
            kind="xla_no_device_profile",
            severity="warning",
            file=result.function.file,
            line=result.function.line,
            message=f"No per-line Neuron device time: {reason}. The figures shown are "
            f"{result.clock} host time per HLO instruction, not device time.",
            fix="check `trainium-lens doctor` (neuron-explorer) on the host; open the run in Neuron "
            "Explorer to see the device profile itself",
        )
    ]

"""Findings only an xla run can have (the backend's own signals)."""

from __future__ import annotations

from trainium_lens.model.result import Finding, Result


def xla_findings(result: Result) -> list[Finding]:
    if result.backend != "xla":
        return []
    return no_instructions(result) + recompile_every_step(result) + no_device_profile(result)


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


def recompile_every_step(result: Result) -> list[Finding]:
    """torch_xla compiled a new graph in (nearly) every measured step: the traced
    graph differs per call, so each step pays a compile and the figures are of a
    program that never settles."""
    steps = result.totals.steps
    compiles = result.signals.compiles_in_active_steps
    if steps <= 0 or compiles < steps:
        return []
    return [
        Finding(
            kind="xla_recompile_every_step",
            severity="warning",
            file=result.function.file,
            line=result.function.line,
            message=f"torch_xla compiled {compiles} graphs in {steps} measured steps: the traced "
            f"graph changes every call (a shape that changes, a Python number baked in as a "
            f"constant, or .item()/print() cutting the graph), so every step compiles.",
            fix="keep shapes fixed (pad or bucket), pass changing numbers as tensors, and keep "
            ".item()/print() out of the step; PT_XLA_DEBUG_LEVEL=2 says why each graph differs",
        )
    ]


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

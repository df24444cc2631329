"""Findings only a TorchNeuron (backend ``neuron``) run can have."""

from __future__ import annotations

from trainium_lens.model.result import Finding, Result


def neuron_findings(result: Result) -> list[Finding]:
    if result.backend != "neuron":
        return []
    return no_device_profile(result)


def no_device_profile(result: Result) -> list[Finding]:
    """key_averages() had no device time and the device profile could not stand in
    (engine/device_profile.py said why): the figures are the host's CPU time."""
    reason = result.signals.neuron_profile_error
    if not reason:
        return []
    return [
        Finding(
            kind="neuron_no_device_profile",
            severity="warning",
            file=result.function.file,
            line=result.function.line,
            message=f"No per-line Neuron device time from the device profile either: {reason}. "
            f"The figures shown are {result.clock} time.",
            fix="check `trainium-lens doctor` (neuron-explorer, the profiling API) on the host; open "
            "the run in Neuron Explorer to see the device profile itself",
        )
    ]

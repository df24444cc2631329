"""The xla findings on stored results: pure functions of the result, no run needed."""

from __future__ import annotations


def test_xla_findings_from_signals():
    """Recompiling every step, and no instruction at all, each said in the
    backend's own words (not the CUDA/Neuron no-device-time text)."""
    from trainium_lens.analysis.findings import analyze
    from trainium_lens.model.result import Result

    base = {
        "schema_version": 1,
        "run_id": "r",
        "created_at": "2026-11-30T00:00:00+00:00",
        "backend": "xla",
        "clock": "xla-cpu",
        "host": "local",
        "function": {"file": "m.py", "name": "f", "line": 3},
        "totals": {"self_time_us": 1.0, "self_cpu_us": 1.0, "wall_us_median": 5.0, "steps": 5},
    }
    steady = Result.from_dict(dict(base, signals={"compiles_in_active_steps": 0}))
    assert not [f for f in analyze(steady) if f.kind.startswith("xla_")]
    churn = Result.from_dict(dict(base, signals={"compiles_in_active_steps": 5}))
    assert [f.kind for f in analyze(churn) if f.kind.startswith("xla_")] == ["xla_recompile_every_step"]
    empty = Result.from_dict(dict(base, signals={"device_time_reported": False}))
    kinds = [f.kind for f in analyze(empty)]
    assert "xla_no_instructions" in kinds and "no_device_time" not in kinds
    other = Result.from_dict(
        dict(
            base,
            backend="cpu",
            clock="cpu",
            signals={"compiles_in_active_steps": 5, "neuron_profile_error": "x"},
        )
    )
    assert not [f for f in analyze(other) if f.kind.startswith("xla_")]  # xla findings are xla's alone

"""The xla findings on stored results: pure functions of the result, no run needed."""

from __future__ import annotations


def test_xla_findings_from_signals():
    """Recompiling every step, and no instruction at all, each said in the
    backend's own words (not the CUDA/Neuron no-device-time text)."""
    from trainium_lens.analysis.findings.analyze import analyze
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


BASE = {
    "schema_version": 3,
    "run_id": "r",
    "created_at": "2026-11-30T00:00:00+00:00",
    "backend": "xla",
    "clock": "xla-cpu",
    "host": "local",
    "function": {"file": "m.py", "name": "step", "line": 3},
    "totals": {"self_time_us": 100.0, "self_cpu_us": 100.0, "wall_us_median": 500.0, "steps": 5},
}


def _line(n: int, instructions: int) -> dict:
    """A hot line of a compiled graph: many HLO instructions, each once per step."""
    ops = [
        {"name": f"fusion.{i}", "calls": 1, "self_time_us": 1.0, "direct_calls": 1}
        for i in range(instructions)
    ]
    return {
        "file": "m.py",
        "line": n,
        "self_time_us": 40.0,
        "total_time_us": 40.0,
        "self_cpu_us": 40.0,
        "calls": instructions,
        "ops": ops,
    }


def _analyze(**fields):
    from trainium_lens.analysis.findings.analyze import analyze
    from trainium_lens.model.result import Result

    return analyze(Result.from_dict(dict(BASE, **fields)))


def test_a_compiled_graph_gets_no_eager_advice():
    """Hot lines with dozens of instructions, an optimizer that 'loops': none of the
    eager findings (dispatch count, fusion pattern, per-parameter loop) applies."""
    findings = _analyze(
        lines=[_line(10, 38), _line(11, 4)],
        optimizers=[
            {"name": "Optimizer.step#AdamW.step", "file": "m.py", "line": 12, "calls": 1, "ops": 178}
        ],
        signals={"compiles_in_active_steps": 0, "recompiles": 2},
    )
    kinds = {f.kind for f in findings}
    assert not kinds & {"dispatches", "fused_op", "optimizer_loop", "recompile", "compile_in_steps"}
    cpu = _analyze(backend="cpu", clock="cpu", lines=[_line(10, 38)])
    assert "dispatches" in {f.kind for f in cpu}  # (the same line on eager still gets it)


def test_a_host_sync_is_a_finding_on_its_line_that_says_what_to_do_on_xla():
    findings = _analyze(
        signals={
            "graphs_per_step": 2,
            "host_syncs": [
                {"file": "m.py", "line": 7, "calls": 1, "graphs": 1, "transfers": 1, "what": ["item"]}
            ],
        }
    )
    [sync] = [f for f in findings if f.kind == "xla_host_sync"]
    assert (sync.file, sync.line, sync.severity) == ("m.py", 7, "warning")
    assert ".item()" in sync.message and "another graph" in sync.message
    assert sync.fix and "xm.add_step_closure" in sync.fix
    assert not [f for f in findings if f.kind == "xla_graphs_per_step"]  # the line says why already


def test_reading_a_value_already_computed_is_a_wait_not_a_cut_graph():
    """``loss.item()`` after ``torch_xla.sync()``: a copy, no execution (a script's loop)."""
    findings = _analyze(
        signals={
            "host_syncs": [
                {"file": "m.py", "line": 9, "calls": 1, "graphs": 0, "transfers": 1, "what": ["item"]}
            ],
        }
    )
    [sync] = [f for f in findings if f.kind == "xla_host_sync"]
    assert "waits for the device" in sync.message and "another graph" not in sync.message
    assert sync.fix and "every N steps" in sync.fix


def test_more_than_one_graph_without_a_line_to_blame_names_the_explicit_sync():
    [f] = [f for f in _analyze(signals={"graphs_per_step": 3}) if f.kind.startswith("xla_")]
    assert (f.kind, f.line) == ("xla_graphs_per_step", 3) and "torch_xla.sync()" in f.message
    assert not [f for f in _analyze(signals={"graphs_per_step": 1}) if f.kind.startswith("xla_")]


def test_a_cpu_fallback_is_on_its_line_and_a_dynamic_shape_says_so():
    findings = _analyze(
        signals={
            "compiles_in_active_steps": 2,
            "xla_fallbacks": [{"op": "aten::nonzero", "file": "m.py", "line": 9, "calls": 1}],
            "host_syncs": [{"file": "m.py", "line": 9, "calls": 1, "graphs": 1, "transfers": 2}],
        }
    )
    by_kind = {f.kind: f for f in findings if f.kind.startswith("xla_")}
    assert set(by_kind) == {"xla_cpu_fallback", "xla_compile_in_steps"}  # no second sync finding on 9
    fallback = by_kind["xla_cpu_fallback"]
    assert fallback.line == 9 and "output shape depends on the data" in fallback.message
    assert "torch.where" in (fallback.fix or "")
    compile_ = by_kind["xla_compile_in_steps"]
    assert (
        compile_.line == 3 and "Lines that cut the graph or have data-dependent shapes: 9" in compile_.message
    )

"""The roof (tables, the measured CPU roof, Neuron cores), the per-line roofline
arithmetic and verdicts, function MFU, and the findings drawn from them — on
results built by hand (a CUDA or Neuron result cannot be made on this machine:
these documents stand in for them)."""

from __future__ import annotations

import pytest

from trainium_lens.analysis.findings.analyze import analyze
from trainium_lens.analysis.roofline import peaks
from trainium_lens.analysis.roofline.points import function_mfu, line_roofs, step_roof
from trainium_lens.model import figures as units
from trainium_lens.model.result import Result

FILE = "model.py"
CPU_ROOF = {
    "device": "Test CPU (2 torch threads)",
    "flops": [{"dtype": "float32", "flops_per_s": 1e11}, {"dtype": "bfloat16", "flops_per_s": 2e11}],
    "bytes_per_s": 1e10,
    "source": "measured on this host",
    "measured": True,
}


def line(n, *, us, flops=0.0, bytes_=0.0, bwd_us=0.0, bwd_flops=0.0, bwd_bytes=0.0, ops=(), **more):
    return {
        "file": FILE,
        "line": n,
        "self_time_us": us,
        "self_time_us_median": us,
        "total_time_us": us,
        "self_cpu_us": us,
        "calls": float(len(ops)),
        "text": f"line {n}",
        "function": more.pop("function", "step"),
        "ops": [
            {"name": o, "calls": 1.0, "self_time_us": us / max(len(ops), 1), "direct_calls": 1.0} for o in ops
        ],
        "backward_self_time_us": bwd_us,
        "flops": flops,
        "bytes": bytes_,
        "backward_flops": bwd_flops,
        "backward_bytes": bwd_bytes,
        "dtype": more.pop("dtype", "float32"),
        **more,
    }


def result(lines, roof=CPU_ROOF, backend="cpu", clock=None, env=None, **extra) -> Result:
    total = sum(ln["self_time_us"] + ln.get("backward_self_time_us", 0.0) for ln in lines)
    doc = {
        "schema_version": 3,
        "run_id": "r-0",
        "created_at": "2026-11-30T10:00:00Z",
        "backend": backend,
        "clock": clock or backend,
        "host": "local",
        "function": {"file": FILE, "name": "step", "line": 1},
        "totals": {
            "self_time_us": total,
            "self_cpu_us": total,
            "wall_us_median": total,
            "steps": 5,
            "backward_time_us": sum(ln.get("backward_self_time_us", 0.0) for ln in lines),
        },
        "lines": lines,
        "environment": env or {},
        "roof": roof,
        **extra,
    }
    return Result.from_dict(doc)


def test_a_measured_cpu_roof_is_used_and_the_dtype_picks_the_peak():
    r = result([line(3, us=1000.0, flops=5e7, bytes_=1e5, dtype="bfloat16")])
    (fwd,) = line_roofs(r, r.lines[0])
    assert peaks.resolve(r) is r.roof
    assert fwd.peak_flops == 2e11 and fwd.dtype == "bfloat16"
    assert fwd.flops_per_s == pytest.approx(5e10)
    assert fwd.flops_pct == pytest.approx(25.0)
    assert fwd.intensity == pytest.approx(500.0)
    # no float16 peak measured: float32's, and the point says so
    r16 = result([line(3, us=1000.0, flops=5e7, bytes_=1e5, dtype="float16")])
    assert line_roofs(r16, r16.lines[0])[0].dtype == "float32"


def test_verdicts():
    r = result(
        [
            line(1, us=1000.0, flops=5e7, bytes_=1e5),  # roof 500 µs of compute: 50%
            line(2, us=100.0, flops=1e3, bytes_=5e5),  # roof 50 µs of memory: 50%
            line(3, us=500.0, flops=1e3, bytes_=1e4),  # roof 1 µs: 0.2% of the time
        ]
    )
    verdicts = [step_roof(r, s).verdict for s in r.lines]
    assert verdicts == ["compute-bound", "memory-bound", "overhead-bound"]
    assert step_roof(r, r.lines[1]).pct_of_peak == pytest.approx(50.0)  # of the bandwidth


def test_backward_point_uses_backward_time_and_recompute():
    r = result(
        [line(4, us=100.0, flops=1e6, bytes_=1e4, bwd_us=150.0, bwd_flops=2e6, recompute_time_us=50.0)]
    )
    fwd, bwd = line_roofs(r, r.lines[0])
    assert (fwd.phase, bwd.phase) == ("forward", "backward")
    assert bwd.time_us == 200.0 and bwd.flops == 2e6
    assert step_roof(r, r.lines[0]).flops == 3e6


def test_function_mfu_is_over_the_unprofiled_wall():
    r = result([line(1, us=1000.0, flops=5e7, bytes_=1e5)], work={"source": "shapes", "flops": 5e7})
    mfu = function_mfu(r)
    assert mfu is not None and mfu.basis == "unprofiled wall time"
    assert mfu.mfu == pytest.approx(5e7 / 1e-3 / 1e11)


@pytest.mark.parametrize(
    "name,tf32,bf16,fp32,bw",
    [
        ("NVIDIA H100 80GB HBM3", False, 989.4e12, 66.9e12, 3.35e12),
        ("NVIDIA H100 PCIe", False, 756e12, 51e12, 2.0e12),
        ("NVIDIA H200", True, 989.4e12, 494.7e12, 4.8e12),
        ("NVIDIA A100-SXM4-80GB", False, 312e12, 19.5e12, 2.039e12),
        ("NVIDIA A100-SXM4-40GB", True, 312e12, 156e12, 1.555e12),
    ],
)
def test_cuda_table_by_device_name_and_tf32(name, tf32, bf16, fp32, bw):
    r = result([], roof={"device": name, "tf32": tf32}, backend="cuda", env={"device_name": name})
    roof = peaks.resolve(r)
    assert roof is not None and name in roof.source and "datasheet" in roof.source
    by = {p.dtype: p.flops_per_s for p in roof.flops}
    assert (by["bfloat16"], by["float32"], roof.bytes_per_s) == pytest.approx((bf16, fp32, bw))


def test_an_unknown_gpu_has_no_roof():
    r = result([], roof={"device": "NVIDIA Mystery"}, backend="cuda", env={"device_name": "NVIDIA Mystery"})
    assert peaks.resolve(r) is None


def test_neuron_peaks_per_core_used():
    trn1 = result([], roof=None, backend="neuron", env={"instance_type": "trn1.32xlarge", "neuron_cores": 1})
    roof = peaks.resolve(trn1)
    by = {p.dtype: p.flops_per_s for p in roof.flops}
    assert by["bfloat16"] == pytest.approx(95e12) and by["float32"] == pytest.approx(23.75e12)
    assert roof.bytes_per_s == pytest.approx(410 * 2**30)
    assert "Neuron docs" in roof.source and "1/2 cores" in roof.source
    trn2 = result([], roof=None, backend="neuron", env={"instance_type": "trn2.48xlarge", "neuron_cores": 8})
    by2 = {p.dtype: p.flops_per_s for p in peaks.resolve(trn2).flops}
    assert by2["bfloat16"] == pytest.approx(667e12) and by2["float8_e4m3fn"] == pytest.approx(1299e12)
    # xla host time per instruction is never measured against the device's peak
    host = result([], roof=None, backend="xla", clock="xla-cpu", env={"instance_type": "trn1.2xlarge"})
    assert peaks.resolve(host) is None
    device = result([], roof=None, backend="xla", clock="neuron", env={"instance_type": "trn1.2xlarge"})
    assert peaks.resolve(device) is not None


def test_device_profile_metadata_roof():
    roof = peaks.from_neuron_metadata(128, 128, 2.8, 410 * 2**30)
    assert roof.flops[0].flops_per_s == pytest.approx(2 * 128 * 128 * 2.8e9)
    assert "Metadata" in roof.source


def test_overhead_finding_replaces_the_dispatch_hint():
    lines = [
        line(2, us=500.0, flops=0.0, bytes_=1e4, ops=("aten::mul", "aten::add", "aten::sin")),
        line(3, us=500.0, flops=5e7, bytes_=1e5, ops=("aten::mm",)),
    ]
    found = analyze(result(lines))
    kinds = {(f.kind, f.line) for f in found}
    assert ("overhead_bound", 2) in kinds and ("dispatches", 2) not in kinds
    msg = next(f.message for f in found if f.kind == "overhead_bound")
    assert "3 ops per execution (mul, add, sin)" in msg and "1 µs" in msg


def test_memory_bound_finding_names_the_elementwise_passes():
    lines = [line(2, us=100.0, flops=0.0, bytes_=5e5, ops=("aten::mul", "aten::add")), line(3, us=10.0)]
    found = [f for f in analyze(result(lines)) if f.kind == "memory_bound"]
    assert len(found) == 1 and "2 elementwise dispatches" in found[0].message
    assert units.pct(50.0) in found[0].message


def test_checkpoint_finding_for_a_block_that_holds_the_peak():
    mem = {"available": True, "peak_bytes": 100 * 2**20, "peak_phase": "backward", "device": "cpu"}
    block = [
        line(10, us=300.0, bwd_us=100.0, function="Block.forward", saved_activation_bytes=30 * 2**20),
        line(11, us=200.0, bwd_us=100.0, function="Block.forward", saved_activation_bytes=10 * 2**20),
    ]
    step = [line(20, us=100.0, bwd_us=10.0, saved_activation_bytes=60 * 2**20)]  # the profiled function
    found = [f for f in analyze(result(block + step, memory=mem)) if f.kind == "checkpoint"]
    assert len(found) == 1 and found[0].line == 10
    assert (
        "Block.forward() keeps 40 MiB" in found[0].message and "40% of the step's 100 MiB" in found[0].message
    )
    # the recompute is not estimated from the forward time (it read 1.1-1.6x low)
    assert "µs" not in found[0].message and "untested" in found[0].message
    # already checkpointed: nothing to say
    block[0]["recompute_time_us"] = 50.0
    assert not [f for f in analyze(result(block + step, memory=mem)) if f.kind == "checkpoint"]


def test_a_schema_2_result_has_no_work():
    doc = result([line(3, us=10.0)]).to_dict()
    for ln in doc["lines"]:
        for key in ("flops", "bytes", "backward_flops", "backward_bytes", "dtype"):
            del ln[key]
    doc.update(schema_version=2, roof=None)
    r = Result.from_dict(doc)
    assert r.lines[0].flops is None and line_roofs(r, r.lines[0]) == []


def test_far_below_the_roof_with_big_ops_is_not_called_overhead():
    """A 5 GFLOP matmul at 1% of the peak: its op is not tiny (the roof allows it 50 ms),
    so the time is not launch overhead: ``below-roof``, and the finding says so."""
    r = result([line(3, us=5e6, flops=5e9, bytes_=1e6, ops=("aten::mm",)), line(4, us=10.0)])
    (fwd,) = line_roofs(r, r.lines[0])
    assert fwd.verdict == "below-roof" and fwd.efficiency == pytest.approx(0.01)
    found = [f for f in analyze(r) if f.line == 3]
    assert [f.kind for f in found] == ["below_roof"]
    assert "1% of the float32 peak" in found[0].message and "not launch overhead" in found[0].message


def test_memory_bound_line_that_spells_out_tanh_gelu_is_told_the_fused_op_once():
    """The pattern finding names F.gelu (with its figures); the roofline does not say
    it a second time as memory-bound."""
    ops = ("aten::mul", "aten::pow", "aten::mul", "aten::add", "aten::mul", "aten::tanh", "aten::add")
    r = result([line(5, us=100.0, bytes_=5e5, ops=ops), line(6, us=10.0)])
    on_line = [f for f in analyze(r) if f.line == 5]
    (named,) = [f for f in on_line if f.kind == "fused_op"]
    assert not [f for f in on_line if f.kind in ("memory_bound", "overhead_bound")]
    assert 'approximate="tanh"' in named.message and named.candidate.startswith("torch.nn.functional.gelu")


def test_memory_bound_elementwise_line_without_a_named_pattern_is_told_to_fuse():
    ops = ("aten::mul", "aten::add", "aten::sub", "aten::div")
    r = result([line(5, us=100.0, bytes_=5e5, ops=ops), line(6, us=10.0)])
    found_all = analyze(r)
    (found,) = [f for f in found_all if f.kind == "memory_bound"]
    assert not [f for f in found_all if f.kind == "dispatches" and f.line == 5]
    assert (
        "a fused kernel (torch.compile)" in found.message
        and found.candidate == "torch.compile"
        and found.fix is None
        and "untested" in found.message
    )


def test_an_optimizer_line_is_left_to_the_optimizer_finding():
    """The measured-implementations finding names the fix for an optimizer step; the
    roofline does not add "a fused kernel (torch.compile)" on the same line."""
    from trainium_lens.analysis.findings.roofline import with_roofline_findings
    from trainium_lens.model.result import Finding

    ops = ("aten::_foreach_add", "aten::_foreach_mul", "aten::_foreach_lerp", "aten::_foreach_sqrt")
    r = result([line(5, us=100.0, bytes_=5e5, ops=ops), line(6, us=10.0)])
    assert [f.kind for f in with_roofline_findings(r, [])] == ["memory_bound"]  # alone: said
    choice = Finding("optimizer_choice", "info", FILE, 5, "AdamW.step runs foreach=True ...")
    assert [f.kind for f in with_roofline_findings(r, [choice])] == ["optimizer_choice"]

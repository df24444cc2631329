"""Findings and comparisons, as pure functions of results.

The results here are built by hand: most signals (CPU fallback, missing
device time, host→device copies) only occur on a Neuron or CUDA device, which
this machine lacks — these documents stand in for results from such a host.
The RMSNorm finding on a real CPU profile is checked in integration/cli/test_cli.py.
"""

from __future__ import annotations

from trainium_lens.analysis.compare import compare_variants, diff_runs, tolerance_for
from trainium_lens.analysis.findings.analyze import analyze
from trainium_lens.analysis.findings.ops import direct_ops
from trainium_lens.model.result import Result

FILE = "examples/rmsnorm.py"


def line(n, text, ops, function="f", self_us=None):
    ops = [{"name": name, "calls": calls, "self_time_us": us} for name, calls, us in ops]
    total = sum(o["self_time_us"] for o in ops) if self_us is None else self_us
    return {
        "file": FILE,
        "line": n,
        "self_time_us": total,
        "total_time_us": total,
        "self_cpu_us": total,
        "calls": sum(o["calls"] for o in ops),
        "text": text,
        "function": function,
        "ops": ops,
    }


def result(lines, backend="cpu", name="f", run_id="r-0", **extra) -> Result:
    total = sum(ln["self_time_us"] for ln in lines)
    doc = {
        "schema_version": 1,
        "run_id": run_id,
        "created_at": "2026-11-29T10:00:00Z",
        "backend": backend,
        "clock": backend,
        "host": "local",
        "function": {"file": FILE, "name": name, "line": 10},
        "totals": {
            "self_time_us": total,
            "self_cpu_us": total,
            "wall_us_median": total,
            "steps": 5,
            "dispatches": sum(ln["calls"] for ln in lines),
        },
        "lines": lines,
    }
    for key, value in extra.items():
        doc[key] = value
    return Result.from_dict(doc)


NAIVE = [
    line(12, "ms = (x * x).mean(-1, keepdim=True)", [("aten::mul", 1, 10.0), ("aten::mean", 1, 15.0)]),
    line(13, "r = torch.rsqrt(ms + eps)", [("aten::add", 1, 5.0), ("aten::rsqrt", 1, 6.0)]),
    line(14, "return x * r * w", [("aten::mul", 2, 20.0)]),
]


def kinds(findings):
    return [(f.kind, f.line) for f in findings]


def test_rmsnorm_pattern_names_torch_rms_norm():
    found = analyze(result(NAIVE))
    fused = [f for f in found if f.kind == "fused_op"]
    assert len(fused) == 1
    assert fused[0].line == 12 and fused[0].candidate == "torch.rms_norm" and "untested" in fused[0].message
    assert "lines 12–14" in fused[0].message and "6 dispatches" in fused[0].message
    # The per-line hints: every line here dispatches two compute ops.
    assert [f.line for f in found if f.kind == "dispatches"] == [12, 13, 14]
    assert all(f.severity == "hint" for f in found if f.kind == "dispatches")


def test_fused_line_is_quiet():
    # As a CPU profile records it: the one direct dispatch (rms_norm) and the
    # ops it runs inside (pow, mean, add, rsqrt, mul...), which must not read
    # as RMSNorm written out.
    nested = [
        ("aten::mul", 2, 17.3),
        ("aten::_fused_rms_norm", 1, 15.5),
        ("aten::_to_copy", 5, 15.1),
        ("aten::rms_norm", 1, 10.5),
        ("aten::pow", 1, 10.0),
        ("aten::add_", 1, 8.4),
        ("aten::mean", 1, 6.3),
        ("aten::rsqrt", 1, 3.9),
        ("aten::to", 6, 5.0),
    ]
    fused = [line(20, "return torch.rms_norm(x, (512,), w, eps)", nested)]
    fused[0]["calls"] = 1  # the harness counts direct dispatches only
    ops = [
        {"name": n, "calls": c, "self_time_us": t, "total_time_us": t, "self_cpu_us": t} for n, c, t in nested
    ]
    ops[3]["total_time_us"] = 139.0  # rms_norm spans everything else
    ops[1]["total_time_us"] = 129.0
    res = result(fused, ops=ops)
    assert [o.name for o in direct_ops(res.lines[0], res)] == ["aten::rms_norm"]
    assert analyze(res) == []


def test_direct_ops_of_a_bf16_mean_line():
    nested = [
        ("aten::mean", 1, 15.1),
        ("aten::sum", 1, 10.7),
        ("aten::copy_", 4, 13.1),
        ("aten::_to_copy", 3, 12.9),
        ("aten::div_", 1, 10.1),
        ("aten::to", 3, 3.9),
    ]
    ln = line(23, "mean = x2.mean(-1, keepdim=True)", nested)
    ln["calls"] = 1
    totals = {
        "aten::mean": 68.0,
        "aten::sum": 20.2,
        "aten::copy_": 13.1,
        "aten::_to_copy": 31.2,
        "aten::div_": 16.3,
        "aten::to": 35.1,
    }
    ops = [
        {"name": n, "calls": c, "self_time_us": t, "total_time_us": totals[n], "self_cpu_us": t}
        for n, c, t in nested
    ]
    res = result([ln], ops=ops)
    assert [o.name for o in direct_ops(res.lines[0], res)] == ["aten::mean"]


def test_one_slow_step_does_not_hide_the_other_lines():
    # A preempted step made line 12's mean 50× its median: shares by median
    # still see the other lines' dispatches.
    lines = [dict(ln) for ln in NAIVE]
    for ln in lines:
        ln["self_time_us_median"] = ln["self_time_us"]
    lines[0]["self_time_us"] = 1000.0
    res = result(lines)
    res.totals.per_step_self_time_us = [56.0, 55.0, 57.0, 56.0, 4700.0]
    assert [f.line for f in analyze(res) if f.kind == "dispatches"] == [12, 13, 14]
    res.totals.per_step_self_time_us = []  # without the spread: by means
    assert [f.line for f in analyze(res) if f.kind == "dispatches"] == [12]


def test_views_and_cheap_lines_do_not_count():
    lines = [
        line(12, "y = x.view(4, -1).t()", [("aten::view", 1, 1.0), ("aten::t", 1, 1.0)]),
        line(13, "z = y @ y.T", [("aten::mm", 1, 500.0)]),
        line(14, "a = z + 1 + 2", [("aten::add", 2, 4.0)]),
    ]  # < 5 % of the time
    assert analyze(result(lines)) == []


def test_softmax_pattern():
    lines = [
        line(12, "e = torch.exp(x)", [("aten::exp", 1, 10.0)]),
        line(13, "return e / e.sum(-1, keepdim=True)", [("aten::sum", 1, 10.0), ("aten::div", 1, 10.0)]),
    ]
    fused = [f for f in analyze(result(lines)) if f.kind == "fused_op"]
    assert fused[0].candidate == "torch.softmax"


def test_neuron_signals_stand_in():
    # Stand-in for a Neuron run: no device time, a CPU fallback, an h2d copy,
    # a compile during the measured steps and an NEURON_RT_INSPECT clash.
    lines = [
        line(12, "y = torch.special.zeta(x, q)", [("aten::special_zeta", 1, 80.0)]),
        line(13, "z = y * 2.0", [("aten::mul", 1, 20.0)]),
    ]
    res = result(
        lines,
        backend="neuron",
        signals={
            "device_time_reported": False,
            "cpu_fallback_ops": ["aten::special_zeta"],
            "h2d_copies": [{"name": f"{FILE}:13", "calls": 1, "self_time_us": 3.0}],
            "h2d_copy_lines": [{"file": FILE, "line": 13}],
            "compiles_in_active_steps": 2,
            "recompiles": 1,
            "neuron_rt_inspect_clash": True,
            "instrumentation_overhead": 12.5,
        },
    )
    found = analyze(res)
    assert kinds(found)[:6] == [
        ("compile_in_steps", 10),
        ("neuron_rt_inspect", 10),
        ("no_device_time", 10),
        ("recompile", 10),
        ("cpu_fallback", 12),
        ("h2d_copy", 13),
    ]
    assert all(f.severity == "warning" for f in found[:6])
    no_dev = found[2]
    assert "falls back to CPU time" in no_dev.message and "synchronize" in no_dev.message
    assert "warmup=3" in found[0].fix  # default warmup 1 + 2
    assert "1 per call, 3 µs" in found[5].message
    assert found[-1].kind == "instrumentation_overhead" and "12.5×" in found[-1].message


def test_cpu_backend_never_reports_missing_device_time():
    res = result(NAIVE, signals={"device_time_reported": False})
    assert "no_device_time" not in [f.kind for f in analyze(res)]


def variant(name, run_id, time, dtype="torch.bfloat16", diff=None, max_abs=3.0, shape=(4, 512)):
    res = result([line(12, "x", [("aten::mul", 1, time)])], name=name, run_id=run_id)
    res.output.dtype, res.output.shape = dtype, list(shape)
    res.output.max_abs_diff, res.output.max_abs = diff, max_abs
    return res


def test_compare_variants_verdicts_and_speedup():
    rows = compare_variants(
        [
            variant("naive", "b-0", 60.0),
            variant("fused", "b-1", 20.0, diff=0.0156),  # one bf16 ulp at 2..4: within tolerance
            variant("broken", "b-2", 30.0, diff=0.5),
            variant("reshaped", "b-3", 30.0, shape=(2048,), diff=0.0),
        ]
    )
    assert [r.verdict for r in rows.rows] == ["reference", "ok", "differs", "shape differs"]
    assert rows.rows[1].speedup == 3.0 and rows.rows[0].speedup == 1.0
    assert rows.fastest == "fused" and rows.reference == "naive" and rows.clock == "cpu"
    assert abs(rows.rows[1].tolerance - (1e-2 + 1.6e-2 * 3.0)) < 1e-12
    as_json = rows.to_dict()
    assert as_json["rows"][2]["verdict"] == "differs"


def test_tolerance_by_dtype():
    assert tolerance_for("torch.float32") == (1e-5, 1.3e-6)
    assert tolerance_for("float16") == (1e-3, 1e-3)
    assert tolerance_for("torch.bfloat16")[0] == 1e-2
    # fp32 demands far more than bf16: the same difference fails there.
    rows = compare_variants(
        [
            variant("a", "b-0", 1.0, dtype="torch.float32"),
            variant("b", "b-1", 1.0, dtype="torch.float32", diff=1e-3),
        ]
    )
    assert rows.rows[1].verdict == "differs"


def test_diff_runs_matches_moved_and_edited_lines():
    before = result(NAIVE, run_id="a-0")
    after_lines = [
        line(10, "# a comment pushed the code down", []),
        line(
            14,
            "ms = (x * x).mean(-1, keepdim=True)",  # moved 12 -> 14, same cost
            [("aten::mul", 1, 10.0), ("aten::mean", 1, 15.0)],
        ),
        line(13, "r = torch.rsqrt(ms.add(eps))", [("aten::add", 1, 5.0), ("aten::rsqrt", 1, 2.0)]),
        line(16, "return x * r * w", [("aten::mul", 2, 10.0)]),  # moved 14 -> 16, faster
    ]
    after = result(after_lines, run_id="a-1")
    d = diff_runs(before, after)
    by_text = {row.text: row for row in d.lines}
    moved = by_text["ms = (x * x).mean(-1, keepdim=True)"]
    assert (moved.before_line, moved.after_line, moved.status, moved.delta_us) == (12, 14, "moved", 0)
    last = by_text["return x * r * w"]
    assert (last.before_line, last.after_line, last.delta_us, last.ratio) == (14, 16, -10.0, 0.5)
    edited = by_text["r = torch.rsqrt(ms.add(eps))"]
    assert (edited.before_line, edited.after_line, edited.status) == (13, 13, "edited")
    assert by_text["# a comment pushed the code down"].status == "added"
    assert d.lines[0].delta_us == -10.0  # biggest change first
    assert d.totals.delta_us == -14.0 and d.comparable and d.note is None
    assert d.to_dict()["totals"]["before_us"] == 56.0


def test_diff_runs_flags_different_clocks():
    d = diff_runs(result(NAIVE, run_id="a"), result(NAIVE, backend="neuron", run_id="b"))
    assert not d.comparable and "different clocks" in d.note and d.clock == "mixed"

"""The harness end to end on the tutorial's RMSNorm, run exactly as a target runs
it: ``python -m trainium_lens.harness`` with the spec on stdin, the real
torch.profiler on CPU. One batch run (module-scoped) serves every assertion."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.support.harness import line_of, run_harness
from trainium_lens.model.result import Batch


@pytest.fixture(scope="module")
def rmsnorm(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("rms") / "run"
    code, events, stderr = run_harness(ROOT, "examples/rmsnorm.py", run_dir)
    assert code == 0, stderr[-3000:] + json.dumps(events[-2:])
    batch = json.loads((run_dir / "batch.json").read_text())
    parsed = Batch.from_dict(batch)
    return {
        "events": events,
        "batch": parsed,
        "raw": batch,
        "run_dir": run_dir,
        "results": {r.function.name: r for r in parsed.results},
    }


EXAMPLE = ROOT / "examples" / "rmsnorm.py"


def test_events_and_batch(rmsnorm):
    events = rmsnorm["events"]
    stages = [e.get("stage") for e in events if e["event"] == "stage"]
    for stage in ("import", "inputs", "compile", "profile", "timing", "export", "done"):
        assert stage in stages
    steps = [e for e in events if e.get("stage") == "profile" and e["function"] == "rms_norm_naive"]
    # progress at most every 0.25 s (an event costs the next step time): the first step
    # says the plan: warmup 1 + active 5, each measured step followed by its plain twin
    # (CPU clock; the protocol's wait ran as settling calls before the profiler)
    assert steps[0]["step"] == 1 and steps[0]["of"] == 11
    assert [e["step"] for e in steps] == sorted({e["step"] for e in steps})
    assert "settle" in stages and stages.count("calibrate") == 1  # calibrated once per run
    assert events[-1] == {"event": "result", "path": str(rmsnorm["run_dir"] / "batch.json")}
    assert [r.function.name for r in rmsnorm["batch"].results] == [
        "rms_norm_naive",
        "rms_norm_fused",
        "rms_norm_compiled",
    ]
    for i, r in enumerate(rmsnorm["batch"].results):
        assert r.run_id == f"{rmsnorm['batch'].batch_id}-{i}"
        assert (r.backend, r.clock, r.totals.steps) == ("cpu", "cpu", 5)
        assert r.function.protocol.active == 5 and r.function.protocol.timing_calls == 20
        assert r.totals.wall_us_median > 0 and r.signals.instrumentation_overhead > 0
        # the wall also timed just before the steps (reconcile: the same calls at two speeds)
        assert r.stability.wall_before_us is not None and r.stability.wall_before_us > 0
        assert r.findings == []
        # one calibration per run, the same in each function's result; under the suite
        # it comes from the machine's shared file (tests/conftest.py) and says so
        assert r.calibration is not None and r.calibration.per_depth_us >= 0
        assert r.calibration.source == rmsnorm["batch"].results[0].calibration.source
        if os.environ.get("TRAINIUM_LENS_CALIBRATION"):
            assert r.calibration.source.startswith(("shared: ", "measured ("))
    # the __main__ block would print: it must not have run
    assert not [e for e in events if e["event"] == "output"]
    assert not list(rmsnorm["run_dir"].glob(".*.tmp"))


def test_naive_ops_land_on_their_lines(rmsnorm):
    r = rmsnorm["results"]["rms_norm_naive"]
    f = "examples/rmsnorm.py"

    def ops(needle):
        stat = r.line(f, line_of(EXAMPLE, needle))
        assert stat is not None, needle
        return stat, {o.name: o.calls for o in stat.ops}

    sq, sq_ops = ops("x2 = x * x")
    assert sq.calls == 1 and sq_ops == {"aten::mul": 1}
    mean, mean_ops = ops("mean = x2.mean")
    assert mean.calls == 1 and mean_ops["aten::mean"] == 1
    rs, rs_ops = ops("torch.rsqrt(mean + eps)")
    assert rs.calls == 2 and rs_ops["aten::add"] == 1 and rs_ops["aten::rsqrt"] == 1
    last, last_ops = ops("return x * rstd * weight")
    assert last.calls == 2 and last_ops == {"aten::mul": 2}
    def_line = line_of(EXAMPLE, "def rms_norm_naive")
    assert r.line(f, def_line) is None
    assert {s.line for s in r.lines} == {sq.line, mean.line, rs.line, last.line}
    assert r.totals.dispatches == 6
    for stat in r.lines:
        assert stat.self_time_us > 0 and stat.self_time_us == pytest.approx(stat.total_time_us)
        assert stat.self_time_us_min <= stat.self_time_us_median <= stat.self_time_us_max
        assert stat.function == "rms_norm_naive" and stat.text
    assert [s.self_time_us for s in r.lines] == sorted((s.self_time_us for s in r.lines), reverse=True)


@pytest.mark.parametrize("name", ["rms_norm_naive", "rms_norm_fused", "rms_norm_compiled"])
def test_sums_reconcile(rmsnorm, name):
    r = rmsnorm["results"][name]
    lines = sum(s.self_time_us for s in r.lines) + r.unattributed_us
    ops = sum(o.self_time_us for o in r.ops)
    assert ops > 0
    assert lines == pytest.approx(ops, rel=0.01)
    assert r.totals.self_time_us == pytest.approx(ops, rel=0.01)
    assert r.totals.self_time_us_min <= r.totals.self_time_us <= r.totals.self_time_us_max * 1.0001
    assert len(r.totals.per_step_self_time_us) == 5
    assert [o.self_time_us for o in r.ops] == sorted((o.self_time_us for o in r.ops), reverse=True)


@pytest.mark.parametrize("name", ["rms_norm_naive", "rms_norm_fused", "rms_norm_compiled"])
def test_reconciled_against_what_the_fit_did_not_use(rmsnorm, name):
    """The figures shown are fitted to the unprofiled wall (host time bounded, calibration
    bounded or raised); the reconciliation compares the figure the fit did not touch, so
    it is not the wall by construction (before: 8 of 9 results read exactly 1.000)."""
    from trainium_lens.analysis.reconcile import reconcile

    r = rmsnorm["results"][name]
    fit, cal, t = r.fit, r.calibration, r.totals
    assert fit is not None and cal is not None
    shown = t.self_time_us + (t.host_time_us or 0.0)
    assert fit.fitted_us == pytest.approx(shown)
    # the host time compared is the one the gaps read, before the wall bounded it
    assert fit.host_us == pytest.approx(cal.host_read_us or 0.0)
    assert t.host_time_us is None or t.host_time_us <= fit.host_us + 1e-9
    if cal.per_depth_read_us is None:  # the calibration applied as read: the ops are as shown
        assert fit.ops_us == pytest.approx(t.self_time_us)
    assert fit.unfitted_us == pytest.approx(fit.ops_us + fit.host_us)
    assert fit.added_us == pytest.approx(fit.fitted_us - fit.unfitted_us)
    assert sum(p.us for p in fit.parts) == pytest.approx(fit.added_us, abs=1e-6)
    rec = reconcile(r)
    assert rec is not None and rec.reference_us == t.wall_us_median
    assert rec.profiled_us == pytest.approx(fit.unfitted_us)
    assert rec.ratio == pytest.approx(fit.unfitted_us / t.wall_us_median)
    if fit.parts:  # something was fitted: the figure compared is not the wall's by construction
        assert rec.shown_us == pytest.approx(shown) and rec.profiled_us != pytest.approx(
            rec.reference_us, rel=1e-6
        )


def test_fused_is_one_line(rmsnorm):
    r = rmsnorm["results"]["rms_norm_fused"]
    assert len(r.lines) == 1
    (stat,) = r.lines
    assert stat.line == line_of(EXAMPLE, "torch.rms_norm(")
    names = {o.name for o in stat.ops}
    assert {"aten::rms_norm", "aten::_fused_rms_norm"} <= names
    assert stat.calls == 1  # one dispatch from user code; the rest is nested inside it
    assert r.output.reference == "rms_norm_naive" and r.output.dtype == "bfloat16"
    assert r.output.shape == [4, 512] and r.output.max_abs_diff < 0.1


def test_compiled_region_on_calling_line(rmsnorm):
    r = rmsnorm["results"]["rms_norm_compiled"]
    call_line = line_of(EXAMPLE, "return _compiled_naive(")
    assert len(r.regions) == 1
    region = r.regions[0]
    assert region.name.startswith("Torch-Compiled Region:")
    assert (region.file, region.line, region.calls) == ("examples/rmsnorm.py", call_line, 1)
    assert region.self_time_us > 0 and region.fx_nodes >= 4
    covered = {(c.file, c.line) for c in region.covered_lines}
    naive_body = {
        ("examples/rmsnorm.py", line_of(EXAMPLE, n))
        for n in ("x2 = x * x", "mean = x2.mean", "torch.rsqrt(mean", "return x * rstd")
    }
    assert covered == naive_body
    (stat,) = r.lines
    assert stat.line == call_line and stat.self_time_us == pytest.approx(region.self_time_us)
    # no extra graph: attribution adds no compile, recompile or graph break
    assert r.signals.compiles_in_active_steps == 0
    assert r.signals.recompiles == 0 and r.signals.graph_breaks == 0


def test_trace_and_timeline_share_a_clock(rmsnorm):
    r = rmsnorm["results"]["rms_norm_naive"]
    trace = Path(r.artifacts.trace)
    assert trace.name == f"{r.run_id}.trace.json" and trace.parent == rmsnorm["run_dir"]
    doc = json.loads(trace.read_text())
    line = line_of(EXAMPLE, "x2 = x * x")
    label = f"examples/rmsnorm.py({line}): rms_norm_naive"
    starts = sorted(e["ts"] for e in doc["traceEvents"] if e.get("name") == label)
    # one per labelled call: calls_per_step of them in each measured step
    assert len(starts) == r.stability.steps_measured * r.totals.calls_per_step
    windows = next(t for t in r.timeline if t.line == line).windows
    assert 0 < len(windows) <= 256  # capped (tree.MAX_WINDOWS)
    assert [w.start_us for w in windows] == pytest.approx(starts[: len(windows)], abs=0.01)

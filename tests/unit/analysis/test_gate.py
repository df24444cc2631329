"""The regression gate on results built by hand, per-step samples chosen to show
each rule: the control (lines that did the same work) cancels the host's load, a
line that does more work is named, overlap is noise, too few steps are said."""

from __future__ import annotations

import random

import pytest

from trainium_lens.analysis.gate import judge as gate
from trainium_lens.analysis.gate.repeat import combine, needs_another
from trainium_lens.analysis.noise import KIND as NOISY
from trainium_lens.model.evidence import Stability
from trainium_lens.model.result import Finding, Result

FILE = "model.py"
TEXTS = {15: "h = torch.relu(x @ w1)", 16: "h = h @ w2", 17: "h = torch.tanh(h)", 18: "return h.sum()"}
OPS = {15: ["aten::mm", "aten::relu"], 16: ["aten::mm"], 17: ["aten::tanh"], 18: ["aten::sum"]}


def run(
    lines: dict[int, list[float]],
    run_id: str = "r-0",
    backend: str = "cpu",
    ops: dict[int, list[str]] | None = None,
    texts: dict[int, str] | None = None,
    schema2: bool = False,
) -> Result:
    """A result whose lines cost ``lines[n]`` in each step."""
    steps = len(next(iter(lines.values())))
    per_step = [round(sum(v[i] for v in lines.values()), 3) for i in range(steps)]
    total = sum(per_step) / steps
    docs = []
    for n, samples in lines.items():
        names = (OPS if ops is None else ops).get(n, ["aten::add"])
        mean = sum(samples) / len(samples)
        doc = {
            "file": FILE,
            "line": n,
            "self_time_us": mean,
            "total_time_us": mean,
            "self_cpu_us": mean,
            "calls": len(names),
            "text": (TEXTS if texts is None else texts).get(n, f"line {n}"),
            "function": "block",
            "ops": [{"name": o, "calls": 1, "self_time_us": mean / len(names)} for o in names],
        }
        if not schema2:
            doc["step_us"] = samples
        docs.append(doc)
    totals = {
        "self_time_us": total,
        "self_cpu_us": total,
        "wall_us_median": total,
        "steps": steps,
        "per_step_self_time_us": per_step,
    }
    if not schema2:
        totals["step_us"] = per_step
    return Result.from_dict(
        {
            "schema_version": 2 if schema2 else 3,
            "run_id": run_id,
            "created_at": "2026-11-30T10:00:00Z",
            "backend": backend,
            "clock": backend,
            "host": "local",
            "function": {"file": FILE, "name": "block", "line": 14},
            "totals": totals,
            "lines": docs,
        }
    )


def noisy(rng: random.Random, us: float, n: int = 20, spread: float = 0.05) -> list[float]:
    return [us * (1 + rng.uniform(0, spread)) for _ in range(n)]


def base_lines(rng: random.Random, scale: float = 1.0, mm2: float = 1.0) -> dict[int, list[float]]:
    return {
        15: noisy(rng, 400 * scale),
        16: noisy(rng, 400 * scale * mm2),
        17: noisy(rng, 120 * scale),
        18: noisy(rng, 20 * scale),
    }


def status(report: gate.Report, line: int | None = None) -> str:
    kind = "function" if line is None else "line"
    return next(i.status for i in report.items if i.kind == kind and (line is None or i.line == line))


def test_same_code_passes():
    rng = random.Random(1)
    report = gate.judge(run(base_lines(rng)), run(base_lines(rng), "r-1"))
    assert not report.failed and report.judgeable
    assert report.drift == pytest.approx(1.0, abs=0.05)
    assert {i.status for i in report.items} <= {gate.OK, gate.FASTER}


def test_a_line_doing_twice_the_work_is_named():
    rng = random.Random(2)
    after = base_lines(rng, mm2=2.0)
    ops = {**OPS, 16: ["aten::mm", "aten::mm"]}
    texts = {**TEXTS, 16: "h = h @ w2 @ w3"}
    report = gate.judge(run(base_lines(rng)), run(after, "r-1", ops=ops, texts=texts))
    assert report.failed
    assert [(i.kind, i.line) for i in report.regressions] == [("function", 14), ("line", 16)]
    line16 = next(i for i in report.items if i.line == 16)
    assert line16.judged_change == pytest.approx(1.0, abs=0.15)
    assert line16.p < 1e-6 and line16.steps == (20, 20)  # a quiet host: every step is clean
    assert "beyond the noise" in line16.reason


def test_a_slower_host_is_not_a_regression():
    """Every step 1.6× slower (another process on the core): the lines that did the
    same work slowed alike; against baseline × that drift nothing changed."""
    rng = random.Random(3)
    report = gate.judge(run(base_lines(rng)), run(base_lines(rng, scale=1.6), "r-1"))
    assert report.drift == pytest.approx(1.6, abs=0.1)
    assert not report.failed and not report.busy
    assert status(report) == gate.OK
    # ... with no line doing the same work the host's speed is unknown: raw figures, a regression
    other_work = {n: ["aten::addmm"] for n in OPS}
    raw = gate.judge(run(base_lines(rng)), run(base_lines(rng, scale=1.6), "r-1", ops=other_work))
    assert raw.drift is None and raw.failed


def test_a_stalled_line_does_not_set_the_hosts_speed():
    """Measured on a loaded 2-core host: the first matmul of most steps stalled
    (13–56 ms against 0.8 ms). The fastest quarter is the code's own cost, and the
    host's speed is the median over the unchanged lines, not one stalled line's."""
    rng = random.Random(12)
    before = base_lines(rng)
    before[15] = [400 * 40 if i % 3 else 400.0 * (1 + rng.uniform(0, 0.05)) for i in range(20)]  # 13 of 20
    after = base_lines(rng)  # the same code, no stalls this time
    report = gate.judge(run(before), run(after, "r-1"))
    assert report.drift == pytest.approx(1.0, abs=0.1)
    assert not report.failed
    line15 = next(i for i in report.items if i.line == 15)
    assert line15.before_us == pytest.approx(400, rel=0.1)  # typical = unstalled


def test_a_host_too_changed_is_busy_and_cannot_fail():
    rng = random.Random(4)
    report = gate.judge(run(base_lines(rng)), run(base_lines(rng, scale=5.0), "r-1"))
    assert report.busy and not report.failed and not report.judgeable


def test_overlapping_steps_are_within_noise():
    """Slower by a third, but the fastest steps of both runs overlap: not shown."""
    spread = [
        0.5,
        1.9,
        0.7,
        1.7,
        0.9,
        1.5,
        1.1,
        1.3,
        0.6,
        1.8,
        0.8,
        1.2,
        0.55,
        1.0,
        0.65,
        1.4,
        0.75,
        1.6,
        0.85,
        1.25,
    ]
    before = {16: [400 * f for f in spread]}
    after = {16: [400 * (1.35 if i % 2 else 1.0) * f for i, f in enumerate(reversed(spread))]}
    report = gate.judge(run(before), run(after, "r-1", ops={16: ["aten::mm", "aten::add"]}))
    item = next(i for i in report.items if i.line == 16)
    assert report.drift is None  # nothing did the same work
    assert item.status == gate.WITHIN_NOISE and not report.failed
    assert item.p is not None and item.p >= 0.01


def test_a_line_that_costs_nothing_cannot_fail_the_build():
    rng = random.Random(6)
    before, after = base_lines(rng), base_lines(rng)
    after[18] = [x * 3 for x in after[18]]  # 20 µs → 60 µs: 3× but 4% of a 940 µs step...
    opts = gate.Options(min_effect=0.05)  # ...under a 5% minimum effect
    report = gate.judge(run(before), run(after, "r-1"), opts)
    assert status(report, 18) == gate.OK
    assert gate.judge(run(before), run(after, "r-1")).failed  # at the default 3% it counts


def test_too_few_steps_are_said_not_passed():
    before = {16: [400.0, 410.0], 17: [100.0, 101.0]}
    after = {16: [900.0, 910.0], 17: [100.0, 101.0]}
    report = gate.judge(run(before), run(after, "r-1", ops={16: ["aten::mm", "aten::mm"]}))
    item = next(i for i in report.items if i.line == 16)
    assert item.status == gate.NOT_JUDGED and "too few steps" in item.reason
    assert not report.judgeable


def test_schema2_baseline_judges_the_function_from_its_steps():
    rng = random.Random(8)
    old = run(base_lines(rng), schema2=True)
    assert old.totals.step_us == [] and old.totals.samples  # per_step_self_time_us
    after = base_lines(rng)
    after[16] = [x * 2 for x in after[16]]
    report = gate.judge(old, run(after, "r-1"))
    assert status(report) == gate.REGRESSED  # the step: raw samples, fastest half
    assert status(report, 16) == gate.NOT_JUDGED  # no per-line samples then
    assert report.drift is None


def test_another_backend_or_machine_kind_is_refused_with_the_reason():
    rng = random.Random(9)
    cpu, cuda = run(base_lines(rng)), run(base_lines(rng), "r-1", backend="cuda")
    assert "backend cuda" in gate.incompatible(cuda, cpu) and "record a baseline on cpu" in gate.incompatible(
        cuda, cpu
    )
    trn1, trn2 = run(base_lines(rng)), run(base_lines(rng), "r-2")
    trn1.environment.instance_type, trn2.environment.instance_type = "trn1.2xlarge", "trn2.48xlarge"
    assert "another kind of machine" in gate.incompatible(trn1, trn2)
    other_host = run(base_lines(rng), "r-3")
    other_host.host = "ci-runner-7"  # same kind, another machine: fine, said in a note
    assert gate.incompatible(other_host, cpu) is None
    assert any("host ci-runner-7" in n for n in gate.judge(other_host, cpu).notes)


def test_measured_again_pooled_and_kept_only_if_slower_every_time():
    rng = random.Random(10)
    ops = {**OPS, 16: ["aten::mm", "aten::mm"]}
    base = run(base_lines(rng))
    slow = [run(base_lines(rng, mm2=2.0), f"s-{i}", ops=ops) for i in range(2)]
    fine = run(base_lines(rng), "f-0", ops=ops)
    assert gate.judge(base, slow[0]).failed and not gate.judge(base, fine).failed
    refuted = combine(base, [slow[0], fine])
    assert not refuted.failed and refuted.judgeable  # slower once, not the second time: noise
    line16 = next(i for i in refuted.items if i.line == 16)
    assert line16.status != gate.REGRESSED
    both = combine(base, slow)
    assert (
        both.failed
        and both.measurements == 2
        and any("2 measurements judged together" in n for n in both.notes)
    )
    busy = run(base_lines(rng, scale=6.0, mm2=2.0), "b-0", ops=ops)
    assert gate.judge(base, busy).busy and needs_another(gate.judge(base, busy))
    alone = combine(base, [slow[0], busy])
    assert not alone.failed and alone.unconfirmed and not alone.judgeable
    assert any("set aside" in n for n in alone.notes)
    assert combine(base, [slow[0]], need=1).failed  # --confirm 0: one measurement decides


def test_pooling_gathers_the_clean_steps_one_run_lacks():
    """As measured on the loaded host: a baseline with 3 clean steps of 20 (the
    rest stalled 30×), runs of the slower code with 4 clean steps each. One run:
    3 against 4 can never reach p < 0.01 (not judged, measure again); three runs
    pooled: 3 against 12, plainly slower."""
    rng = random.Random(17)

    def one(factor: float, clean: int, run_id: str) -> Result:
        ops = {**OPS, 16: ["aten::mm"] * (1 if factor == 1.0 else 2)}  # line 16 does more work
        steps = [400 * factor * (1 + rng.uniform(0, 0.1)) for _ in range(clean)]
        steps += [400 * 30 * rng.uniform(1, 2) for _ in range(20 - clean)]
        return run({15: noisy(rng, 400), 16: steps}, run_id, ops=ops)

    base = one(1.0, 3, "b")
    runs = [one(2.0, 4, f"r-{i}") for i in range(3)]
    first = gate.judge(base, runs[0])
    line16 = next(i for i in first.items if i.line == 16)
    assert line16.status == gate.NOT_JUDGED and line16.steps == (3, 4) and needs_another(first)
    assert "too few steps" in line16.reason
    pooled = combine(base, runs)
    assert [(i.line, i.steps) for i in pooled.regressions if i.kind == "line"] == [(16, (3, 12))]
    assert pooled.failed


def disturbed(result: Result) -> Result:
    """The run as the harness and analysis/noise.py leave it on a busy host."""
    result.stability = Stability(
        steps_wanted=5, steps_measured=15, steps_clean=1, steps_used=15, others_cores=1.6
    )
    result.findings.append(Finding(NOISY, "warning", FILE, 14, "noisy"))
    return result


def test_a_noisy_measurement_is_measured_again_and_said():
    rng = random.Random(23)
    base, same = run(base_lines(rng)), run(base_lines(rng), "r-1")
    quiet = gate.judge(base, same)
    assert not quiet.noisy and not needs_another(quiet)  # nothing to gain from another run
    report = gate.judge(base, disturbed(same))
    assert report.noisy and needs_another(report) and report.judgeable and not report.failed
    [note] = [n for n in report.notes if "disturbed host" in n]
    assert note.startswith("this measurement") and "processes outside this job used 1.6 cores" in note
    assert "within 1.5× of the fastest" in note
    on_noisy_base = gate.judge(disturbed(run(base_lines(rng), "b-1")), run(base_lines(rng), "r-2"))
    assert any(n.startswith("the baseline was measured on a disturbed host") for n in on_noisy_base.notes)
    pooled = combine(base, [disturbed(run(base_lines(rng), "r-3")), run(base_lines(rng), "r-4")])
    assert not pooled.noisy and pooled.judgeable and not pooled.failed  # the pool is no one run
    assert any(n.startswith("1 of them on a disturbed host") for n in pooled.notes)
    assert not any(n.startswith("this measurement") for n in pooled.notes)

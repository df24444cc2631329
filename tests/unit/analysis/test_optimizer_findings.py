"""The optimizer finding names what measured fastest, from OptimizerStat.trials.

The trial figures are the issue's measurements on this machine's CPU (AdamW
step: per-parameter loop 1.16 ms, foreach=True 1.29 ms, fused=True 0.354 ms);
the harness that takes them runs in tests/unit/harness/eager/test_optim_trials.py
and tests/integration/harness/test_advice.py."""

from __future__ import annotations

from tests.unit.analysis.test_findings_and_compare import NAIVE, result
from trainium_lens.analysis.findings.analyze import analyze


def with_step(trials=None, ops=372.0, fused_ops=0.0):
    opt = {
        "name": "Optimizer.step#AdamW.step",
        "file": "examples/rmsnorm.py",
        "line": 14,
        "calls": 1.0,
        "ops": ops,
        "fused_ops": fused_ops,
        "self_time_us": 1500.0,
    }
    if trials is not None:
        opt["trials"] = [
            {"config": c, "current": cur, "time_us": t and t * 1.2, "time_us_min": t, "steps": 9, "error": e}
            for c, cur, t, e in trials
        ]
        opt["trials_device"] = "cpu"
    return result(NAIVE, optimizers=[opt])


ISSUE = [
    ("foreach=False", True, 1160.0, None),
    ("foreach=True", False, 1290.0, None),
    ("fused=True", False, 354.0, None),
]


def test_the_loop_is_told_the_fastest_measured_not_foreach():
    (f,) = [f for f in analyze(with_step(ISSUE)) if f.kind == "optimizer_loop"]
    assert f.severity == "warning" and f.line == 14 and f.fix == "AdamW(..., fused=True)"
    assert "foreach=False 1.16 ms (now), foreach=True 1.29 ms, fused=True 354 µs" in f.message
    assert "on cpu (unprofiled, best of 9)" in f.message and "3.3× faster than now" in f.message
    # the line's generic dispatch hint gives way to it
    assert not [x for x in analyze(with_step(ISSUE)) if x.kind == "dispatches" and x.line == 14]


def test_no_advice_when_what_runs_is_already_fastest():
    trials = [
        ("foreach=False", True, 300.0, None),
        ("foreach=True", False, 320.0, None),
        ("fused=True", False, 290.0, None),  # 3 % faster: within MIN_GAIN, not worth a change
    ]
    assert [f for f in analyze(with_step(trials)) if f.kind.startswith("optimizer")] == []


def test_foreach_with_a_faster_fused_gets_an_info():
    trials = [("foreach=False", False, 1160.0, None), ("foreach=True", True, 1290.0, None), ISSUE[2]]
    (f,) = [f for f in analyze(with_step(trials, ops=12.0, fused_ops=9.0)) if f.kind.startswith("optimizer")]
    assert (f.kind, f.severity, f.fix) == ("optimizer_choice", "info", "AdamW(..., fused=True)")
    assert f.message.startswith("AdamW.step runs foreach=True. Measured")


def test_an_implementation_that_could_not_run_is_named_with_its_reason():
    trials = [
        ("foreach=False", True, 1160.0, None),
        ("foreach=True", False, 700.0, None),
        ("fused=True", False, None, "RMSprop has no fused= option"),
    ]
    (f,) = [f for f in analyze(with_step(trials)) if f.kind == "optimizer_loop"]
    assert "fused=True not run (RMSprop has no fused= option)" in f.message
    assert f.fix == "AdamW(..., foreach=True)"


def test_unmeasured_loop_says_it_was_not_measured_and_current_untimed_says_nothing():
    (f,) = [f for f in analyze(with_step()) if f.kind == "optimizer_loop"]
    assert "Not measured on this run" in f.message and "whichever measures faster" in f.fix
    untimed = [("foreach=False", True, None, "OutOfMemoryError: ..."), ISSUE[1], ISSUE[2]]
    assert [f for f in analyze(with_step(untimed)) if f.kind.startswith("optimizer")] == []


def test_a_disturbed_measurement_names_nothing():
    # nanoGPT's AdamW at load 10 on 2 cores: medians far above the best steps
    trials = [
        ("foreach=False", True, 3412.0, None),
        ("foreach=True", False, 2924.0, None),
        ("fused=True", False, 13580.0, None),
    ]
    res = with_step(trials)
    res.optimizers[0].trials[1].time_us = 59025.0  # the "fastest" mostly waited for other processes
    (f,) = [f for f in analyze(res) if f.kind == "optimizer_loop"]
    assert "disturbed (a median step 20.2× the best" in f.message and "whichever measures faster" in f.fix
    res.optimizers[0].ops = 12.0  # not a loop: nothing to say without a measurement to stand on
    assert [f for f in analyze(res) if f.kind.startswith("optimizer")] == []


def test_a_disturbed_but_decisive_measurement_still_names_the_winner():
    # GPT-2's AdamW at load 6 (best / median µs): loop 2173 / 23902, fused 613 / 802
    res = with_step([("foreach=False", True, 2173.0, None), ("foreach=True", False, 1699.0, None), ISSUE[2]])
    trials = res.optimizers[0].trials
    trials[0].time_us, trials[1].time_us, trials[2].time_us = 23902.0, 9457.0, 802.0
    (f,) = [f for f in analyze(res) if f.kind == "optimizer_loop"]
    assert (
        f.fix == "AdamW(..., fused=True)"
        and "even its median step, 802 µs, beats the current best" in f.message
    )


def paired_step(fused: tuple, foreach: tuple = (1.20, 1.05, 1.40, "undecided")):
    """The loop now; foreach/fused with their paired (ratio, low, high, verdict)."""
    result = with_step(ISSUE)
    for t in result.optimizers[0].trials:
        got = {"foreach=True": foreach, "fused=True": fused}.get(t.config)
        if got:
            t.paired_ratio, t.paired_low, t.paired_high, t.paired_verdict = got
    return result


def test_the_speedup_named_is_the_paired_one_not_the_ratio_of_best_steps():
    # best steps 1160 / 354 µs say 3.3x; the rounds' ratios say 2.4x: the figure is 2.4x
    (f,) = [f for f in analyze(paired_step((2.40, 2.30, 2.50, "faster"))) if f.kind == "optimizer_loop"]
    assert f.fix == "AdamW(..., fused=True)" and "2.40× faster than now" in f.message
    assert "99% interval 2.30–2.50×" in f.message and "3.3×" not in f.message


def test_a_wide_interval_gives_the_range_not_one_figure():
    (f,) = [f for f in analyze(paired_step((1.75, 1.11, 2.81, "faster"))) if f.kind == "optimizer_loop"]
    assert "faster by 1.11–2.81× (median 1.75×)" in f.message and "not measurable to ±15%" in f.message


def test_an_undecided_paired_trial_names_nothing_and_says_not_measurable():
    (f,) = [f for f in analyze(paired_step((1.30, 0.90, 1.90, "undecided"))) if f.kind == "optimizer_loop"]
    assert "not measurable on this host now" in f.message and "whichever measures faster" in f.fix

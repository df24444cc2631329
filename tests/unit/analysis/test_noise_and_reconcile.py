"""Reconciliation with the unprofiled wall and the noise verdict, as pure
functions of results built by hand (the harness's evidence fields set to what
a quiet and a busy host produce; tests/integration/harness/test_noise.py makes
both for real)."""

from __future__ import annotations

from trainium_lens.analysis.findings.analyze import analyze
from trainium_lens.analysis.noise import evidence
from trainium_lens.analysis.reconcile import reconcile
from trainium_lens.model.result import Result

FILE = "f.py"


def _result(
    self_us=100.0,
    wall=100.0,
    clock="cpu",
    stability=None,
    step_us=None,
    span=None,
    calibrated=True,
    regions=(),
    raw_factor=1.3,
    wall_range=None,
    host=None,
    host_read=None,
    depth_read=None,
):
    lines = [
        {
            "file": FILE,
            "line": 12,
            "self_time_us": self_us,
            "total_time_us": self_us,
            "self_cpu_us": self_us,
            "calls": 3,
            "hits": 1,
            "ops": [
                {"name": "aten::mul", "calls": 1, "self_time_us": self_us / 3, "direct_calls": 1},
                {"name": "aten::add", "calls": 1, "self_time_us": self_us / 3, "direct_calls": 1},
                {"name": "aten::tanh", "calls": 1, "self_time_us": self_us / 3, "direct_calls": 1},
            ],
        }
    ]
    doc = {
        "schema_version": 3,
        "run_id": "r-0",
        "created_at": "2026-11-30T10:00:00Z",
        "backend": "cpu" if clock == "cpu" else "cuda",
        "clock": clock,
        "host": "local",
        "function": {"file": FILE, "name": "f", "line": 10, "protocol": {"timing_calls": 20}},
        "totals": {
            "self_time_us": self_us,
            "self_cpu_us": self_us * raw_factor,
            "wall_us_median": wall,
            **({"wall_us_min": wall_range[0], "wall_us_max": wall_range[1]} if wall_range else {}),
            **({"host_time_us": host} if host is not None else {}),
            "steps": 5,
            "step_us": step_us or [self_us] * 5,
            "device_span_us_median": span,
        },
        "lines": lines,
        "stability": stability,
        "regions": list(regions),
    }
    if calibrated and clock == "cpu":
        doc["calibration"] = {"per_depth_us": 0.08}
        if host_read is not None:  # the gaps read more than the wall left: bounded (build.host_scale)
            doc["calibration"].update(host_read_us=host_read, host_scale=host / host_read)
        if depth_read is not None:  # the wall bounded the calibration (build.calibration_kept)
            doc["calibration"].update(per_depth_read_us=depth_read, subtracted_us=self_us * (raw_factor - 1))
    r = Result.from_dict(doc)
    r.reconciliation = reconcile(r)
    r.findings = analyze(r)
    return r


QUIET = {
    "steps_wanted": 5,
    "steps_measured": 5,
    "steps_clean": 5,
    "steps_used": 5,
    "run_delay_share": 0.003,
    "others_cores": 1.1,  # a shared machine: others busy, this run undisturbed
    "timing_calls": 20,
    "timing_clean": 20,
}
BUSY = {
    "steps_wanted": 5,
    "steps_measured": 15,
    "steps_clean": 0,
    "steps_used": 15,
    "extra_steps": 10,
    "run_delay_share": 0.6,
    "others_cores": 0.9,
    "step_switches": 2.5,
    "timing_calls": 60,
    "timing_clean": 3,
}


def kinds(r: Result) -> list[str]:
    return [f.kind for f in r.findings]


def test_a_figure_below_the_wall_only_after_calibration_names_the_calibration():
    """The bundled fused RMSNorm on a fresh clone: raw 34.3 µs, calibrated 7.7 µs, wall 19 µs."""
    r = _result(5.3, 19.0, stability=QUIET, host=2.4, raw_factor=31.9 / 5.3)
    rec = r.reconciliation
    assert not rec.within and "the calibration took off more than" in rec.note
    low = _result(5.3, 19.0, stability=QUIET, host=2.4, raw_factor=1.2)  # low raw too: not the calibration
    assert "the calibration took off" not in low.reconciliation.note


def test_host_time_bounded_by_the_wall_says_what_the_gaps_read():
    r = _result(13.9, 16.1, stability=QUIET, host=2.2, host_read=3.6)
    rec = r.reconciliation
    assert rec.within and rec.ratio == 1.0
    assert "bounded by the unprofiled wall" in rec.note and "3.6 µs" in rec.note and "2.2 µs" in rec.note
    assert _result(13.9, 16.1, stability=QUIET, host=2.0).reconciliation.note == ""  # read, not bounded


def test_cpu_clock_reconciles_both_ways_and_keeps_the_raw_figure():
    r = _result(110.0, 100.0)
    rec = r.reconciliation
    assert rec.reference == "wall" and rec.ratio == 1.1 and rec.within
    assert rec.raw_us == 143.0  # self_cpu_us, the uncalibrated figure
    low = _result(60.0, 100.0, stability=QUIET).reconciliation
    assert not low.within and "Python between the ops" in low.note


def test_device_clock_is_reconciled_against_the_device_span_one_sided():
    r = _result(40.0, 100.0, clock="cuda", span=80.0)
    assert r.reconciliation.reference == "device_span" and r.reconciliation.ratio == 0.5
    assert r.reconciliation.within and r.reconciliation.raw_us is None  # idle gaps are not an error
    over = _result(140.0, 100.0, clock="cuda").reconciliation
    assert over.reference == "wall" and not over.within


def test_a_device_clock_far_under_the_wall_says_where_the_rest_went():
    near = _result(60.0, 100.0, clock="cuda").reconciliation
    assert near.within and near.note == ""
    far = _result(20.0, 100.0, clock="cuda").reconciliation
    assert far.within and far.note.startswith("the other 80% of the wall is host work: the device idles")
    lazy = _result(16.0, 100.0, clock="xla-cpu")
    lazy.backend = "xla"
    note = reconcile(lazy).note
    assert "84% of the wall is host work: tracing the lazy graph" in note and "ran 16% of it" in note


def test_a_quiet_run_is_never_noisy_and_keeps_its_findings():
    r = _result(100.0, 100.0, stability=QUIET)
    assert evidence(r) == []
    assert "noisy_measurement" not in kinds(r) and "dispatches" in kinds(r)


def test_a_busy_run_is_noisy_with_its_evidence_and_timing_findings_withheld():
    r = _result(400.0, 100.0, stability=BUSY, step_us=[100.0, 4000.0, 150.0, 120.0, 900.0])
    (noisy,) = [f for f in r.findings if f.kind == "noisy_measurement"]
    assert noisy.severity == "warning" and noisy.line == 10
    for said in ("0.9 cores", "waited for a CPU 60%", "15 of 15 measured steps", "steps varied 40×", "4×"):
        assert said in noisy.message, said
    # the line's dispatch hint and its tanh GELU pattern are both judged from times
    assert not {"dispatches", "fused_op"} & set(kinds(r))
    assert "2 timing-based findings withheld" in noisy.message
    assert "unreconciled" not in kinds(r)  # the noise explains the ratio


def test_a_noisy_run_whose_torch_threads_fill_every_core_beside_the_load_is_told_to_leave_one():
    # torch's 2 threads on 2 cores beside an outside job: OpenMP's waits (docs/accuracy.md)
    every_core = dict(BUSY, cpus=2, threads=2)
    (noisy,) = [
        f for f in _result(400.0, 100.0, stability=every_core).findings if f.kind == "noisy_measurement"
    ]
    assert "OMP_NUM_THREADS=1" in (noisy.fix or "") and "2 threads on 2 cores" in (noisy.fix or "")
    # one thread already leaves a core to the load; without the thread count nothing is said
    for st in (dict(BUSY, cpus=2, threads=1), BUSY):
        (noisy,) = [f for f in _result(400.0, 100.0, stability=st).findings if f.kind == "noisy_measurement"]
        assert "OMP_NUM_THREADS" not in (noisy.fix or "")


def test_a_busy_host_whose_figures_hold_is_not_noisy():
    busy_host = dict(QUIET, others_cores=1.8, run_delay_share=0.2)
    r = _result(105.0, 100.0, stability=busy_host)
    assert "noisy_measurement" not in kinds(r)


def test_a_quiet_run_out_of_tolerance_is_said_to_be_off_with_its_reason():
    r = _result(200.0, 100.0, stability=QUIET)
    (note,) = [f for f in r.findings if f.kind == "unreconciled"]
    assert note.severity == "info" and "2×" in note.message and "raw 2.6×" in note.message


def test_results_without_evidence_are_left_alone():
    r = _result(100.0, 100.0, calibrated=False)
    assert evidence(r) == [] and r.reconciliation.raw_us is None


def test_a_noisy_torchrun_job_keeps_its_straggler_with_a_caution():
    """Ranks compared with each other in one run: a rank doing several times the work
    shows through a busy host (often the ranks' own contention), so it is kept."""
    from trainium_lens.analysis.noise import with_noise_findings
    from trainium_lens.model.result import Finding

    r = _result(400.0, 100.0, stability=BUSY, step_us=[100.0, 4000.0, 150.0, 120.0, 900.0])
    straggler = Finding("straggler", "warning", "f.py", 12, "rank 1 is the straggler")
    out = with_noise_findings(r, [straggler])
    kept = [f for f in out if f.kind == "straggler"]
    assert len(kept) == 1 and "judged noisy" in kept[0].message
    assert "noisy_measurement" in {f.kind for f in out}


def test_steps_far_apart_with_no_contention_are_said_to_be_the_host():
    """Measured on this VM: one run's steps at 14 and 48-52 µs, every op slower, while
    the scheduler saw no other process: the reason given is the host, not the profiler."""
    alone = dict(QUIET, others_cores=0.0)
    r = _result(35.5, 26.2, stability=alone, step_us=[47.9, 13.7, 49.5, 52.3, 14.0])
    assert not r.reconciliation.within and "noisy_measurement" not in kinds(r)
    assert r.reconciliation.note.startswith("its steps varied 3.8× with the same ops")
    (off,) = [f for f in r.findings if f.kind == "unreconciled"]
    assert "the CPU ran slower in some of them" in off.message
    even = _result(35.5, 26.2, stability=alone, step_us=[35.0, 36.0, 35.5, 35.2, 35.8])
    assert "beyond its calibration" in even.reconciliation.note  # a steady run: the profiler


def test_an_over_read_compiled_function_is_said_to_be_its_wrapper_not_its_ops():
    """The bundled example's compiled variant read 1.17-1.55x its wall in four runs: its
    one region's time is mostly AOTAutograd's Python wrapper (three profiler ranges, no op)."""
    region = {
        "name": "Torch-Compiled Region: 0/0",
        "file": FILE,
        "line": 12,
        "self_time_us": 19.3,
        "calls": 1,
    }
    r = _result(19.3, 14.7, stability=QUIET, regions=[region])
    assert not r.reconciliation.within
    assert r.reconciliation.note.startswith("most of this time is in compiled regions")
    eager = _result(19.3, 14.7, stability=QUIET)
    assert "beyond its calibration" in eager.reconciliation.note


def test_a_cause_is_named_only_when_the_evidence_shows_it():
    """Seen on nanoGPT: 1.54× the wall, every step undisturbed, the calibration had taken
    0.28 ms off a 17 ms gap: the calibration cannot explain that, so no cause is named."""
    steady = [154.0, 155.0, 153.0, 154.5, 154.2]
    small = _result(154.0, 100.0, stability=QUIET, step_us=steady, raw_factor=1.01).reconciliation
    assert not small.within and small.note.startswith("cause unknown"), small.note
    assert "subtracted 1.54 µs of a 54 µs gap" in small.note and small.note.endswith("profile again")
    large = _result(154.0, 100.0, stability=QUIET, step_us=steady, raw_factor=1.5).reconciliation
    assert large.note.startswith("the profiler's cost beyond its calibration"), large.note
    assert "77 µs per call were subtracted" in large.note and large.note.endswith("profile again")


def test_a_disturbed_wall_is_named_as_the_disturbed_side():
    """Seen on a Llama baseline: 0.70× while its wall was the disturbed part (its calls
    spread, the steps steady): the reason is the wall, not work on other threads."""
    steps = [70.0, 70.5, 69.8, 70.2, 70.1]
    spread = _result(
        70.0, 100.0, stability=QUIET, step_us=steps, wall_range=(60.0, 240.0), host=0.0
    ).reconciliation
    assert not spread.within and spread.note.startswith(
        "the unprofiled wall was disturbed (its calls varied 4.0×"
    )
    waited = dict(QUIET, timing_calls=60, timing_clean=17)
    rec = _result(70.0, 100.0, stability=waited, step_us=steps, host=0.0).reconciliation
    assert "43 of 60 of its calls waited for a CPU" in rec.note, rec.note
    # (a calibration that took off little: it cannot explain the gap either)
    unknown = _result(70.0, 100.0, stability=QUIET, step_us=steps, host=0.0, raw_factor=1.05).reconciliation
    assert unknown.note.startswith("cause unknown") and "other threads" not in unknown.note


def test_the_wall_header_says_what_the_median_was_taken_over():
    from trainium_lens.cli.render.result import render_result

    few = dict(QUIET, timing_calls=60, timing_clean=17, timing_used=17)
    text = render_result(_result(100.0, 100.0, stability=few))
    assert "median over 17 calls (17 of 60 calls clean)" in text, text
    batched = dict(QUIET, timing_calls=20, timing_clean=20, timing_used=20, timing_batch=25)
    text = render_result(_result(100.0, 100.0, stability=batched))
    assert "median over 20 samples (20 of 20 samples clean; 25 back-to-back calls each" in text, text


def test_a_calibration_bounded_by_the_wall_says_what_it_read():
    # ops 17 + host 2 meet a 19 µs wall: a quarter of the calibration's reading was subtracted
    bounded = _result(self_us=17.0, wall=19.0, host=2.0, raw_factor=2.0, depth_read=0.32)
    rec = bounded.reconciliation
    assert rec is not None and rec.within
    assert "calibration bounded by the unprofiled wall" in rec.note
    assert "read 320 ns" in rec.note and "25%" in rec.note and "17 µs" in rec.note
    assert _result(self_us=17.0, wall=19.0, host=2.0, raw_factor=2.0).reconciliation.note == ""


def test_a_calibration_raised_to_the_wall_says_what_it_read_and_applied():
    # 0.08 µs per level applied where 0.064 was read: the ops alone had read above the wall
    raised = _result(self_us=17.0, wall=19.0, host=2.0, raw_factor=1.3, depth_read=0.064)
    rec = raised.reconciliation
    assert rec is not None and rec.within
    assert rec.note.startswith("calibration raised to the unprofiled wall"), rec.note
    assert "read 64 ns" in rec.note and "80 ns applied" in rec.note


def test_the_same_calls_at_two_speeds_are_named_not_the_profiler():
    """Seen on the bundled example's ``rms_norm_fused`` (2-core VM): a plain perf_counter
    median read ~20 µs in some processes, ~33 µs in others, and flipped within one. The
    samples just before the profiled steps read 33 µs, the timing calls after them 20 µs:
    the profiled 34 µs then reads 1.7× a wall the steps never met. The calibration is of
    the gap's size (raw 1.5×), yet it is not named: the evidence shows two speeds."""
    steps = [34.0, 34.5, 33.8, 34.2, 34.1]
    moved = dict(QUIET, wall_before_us=33.0)
    rec = _result(34.0, 20.0, stability=moved, step_us=steps, host=0.0, raw_factor=1.5).reconciliation
    assert not rec.within
    assert rec.note.startswith("the function's own unprofiled speed moved in this run"), rec.note
    assert "its fastest calls took 33 µs just before the profiled steps, 20 µs after them" in rec.note, (
        rec.note
    )
    assert "nearest the calls just before the profiled steps" in rec.note and rec.note.endswith(
        "profile again"
    )
    # the fastest of each side is compared: the timing calls' fastest, not their median
    ranged = _result(
        34.0, 21.0, stability=moved, step_us=steps, host=0.0, raw_factor=1.5, wall_range=(19.0, 24.0)
    ).reconciliation
    assert "33 µs just before the profiled steps, 19 µs after them" in ranged.note, ranged.note
    # the variants' rounds in turn are not the same condition (each sample follows another
    # variant's): they alone do not say the speed moved
    paired = _result(34.0, 20.0, stability=QUIET, step_us=steps, host=0.0, raw_factor=1.5)
    paired.totals.paired_wall_us_median = 31.0
    assert "speed moved" not in reconcile(paired).note
    # one speed before and after (within the tolerance): the calibration's size is the evidence again
    same = _result(
        34.0, 20.0, stability=dict(QUIET, wall_before_us=22.0), step_us=steps, host=0.0, raw_factor=1.5
    )
    assert same.reconciliation.note.startswith("the profiler's cost beyond its calibration"), (
        same.reconciliation.note
    )
    # a figure far beyond both speeds is not explained by the move: steps that varied
    # with the same ops are (seen on the compiled variant: 1.6 ms profiled, 85 and 50 µs)
    beyond = _result(
        400.0, 20.0, stability=moved, step_us=[34.0, 900.0, 40.0, 35.0, 1000.0], host=0.0
    ).reconciliation
    assert not beyond.within and "speed moved" not in beyond.note, beyond.note
    assert beyond.note.startswith("its steps varied"), beyond.note
    # beyond both with steady steps: nothing else explains it, and the note does not call
    # the host steady (the fused variant: 58.3 µs before, 25.9 µs after, 92.6 µs profiled)
    unexplained = _result(
        92.6,
        26.0,
        stability=dict(QUIET, wall_before_us=58.3),
        step_us=[92.0, 93.0, 92.5, 92.8, 92.6],
        host=0.0,
    ).reconciliation
    assert not unexplained.within and unexplained.note.startswith("cause unknown"), unexplained.note
    assert "58.3 µs just before the profiled steps and 26 µs after them" in unexplained.note, unexplained.note
    assert "steady" not in unexplained.note
    # within the tolerance nothing is said of speeds at all
    fine = _result(21.0, 20.0, stability=moved, step_us=[21.0] * 5, host=0.0).reconciliation
    assert fine.within and "speed" not in fine.note


def test_a_run_whose_own_unprofiled_speed_moved_is_flagged_with_both_speeds():
    """nanoGPT's forward on a 2-core VM, nothing else running: the fastest call just before
    the profiled steps 3.4 ms, the timing calls after them 10.8 ms; no wait for a CPU, no
    steal, no outside process. The figures shown are fitted to the slower speed: the run is
    unreconciled with both readings, not noisy (a quiet host's own speed moves too: its
    findings are kept)."""
    steps = [10700.0, 10750.0, 10800.0, 10680.0, 10720.0]
    moved = _result(10790.0, 10800.0, stability=dict(QUIET, wall_before_us=3400.0), step_us=steps, host=0.0)
    rec = moved.reconciliation
    assert not rec.within and abs(rec.ratio - 1) <= rec.tolerance
    assert "ran 3.18× slower after the profiled steps than just before them" in rec.note, rec.note
    assert "the fastest 3.4 ms before, 10.8 ms after" in rec.note, rec.note
    assert not evidence(moved) and "noisy_measurement" not in kinds(moved)
    (off,) = [f for f in moved.findings if f.kind == "unreconciled"]
    assert "the unprofiled wall, within ±25%, but its unprofiled calls ran 3.18× slower" in off.message, (
        off.message
    )
    # within 15%, one speed: reconciled
    held = _result(3900.0, 3900.0, stability=dict(QUIET, wall_before_us=3500.0), step_us=steps, host=0.0)
    assert held.reconciliation.within
    # slower before the steps than after: still warming, and the after side is what the
    # figures are fitted to (seen: 4.4 ms before, 3.6 ms after, an independent timer 3.5 ms)
    warming = _result(3600.0, 3600.0, stability=dict(QUIET, wall_before_us=4400.0), step_us=steps, host=0.0)
    assert warming.reconciliation.within
    # the fastest after the steps is compared, not their median (a transient slows some calls)
    ranged = _result(
        3900.0,
        3900.0,
        stability=dict(QUIET, wall_before_us=3500.0),
        step_us=steps,
        host=0.0,
        wall_range=(3600.0, 9000.0),
    )
    assert ranged.reconciliation.within
    # a device clock has no such pair of speeds
    device = _result(3900.0, 10800.0, clock="cuda", stability=dict(QUIET, wall_before_us=3400.0), span=9000.0)
    assert "slower after the profiled steps" not in device.reconciliation.note

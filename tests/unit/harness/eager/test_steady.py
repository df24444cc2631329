"""Steady-state measurement: settling, calls per step, the open-ended step plan,
the host's evidence, and the calibration's event trees (no profiler here)."""

from __future__ import annotations

import os

import pytest
import torch

from trainium_lens.harness.eager import steady
from trainium_lens.harness.eager.calibrate import _trees
from trainium_lens.harness.runtime.host import HostWindow, RunQueueDelay, involuntary_switches


def test_settle_waits_for_a_steady_run_of_calls():
    times = iter([9000.0, 4000.0, 30.0, 900.0, 25.0, 26.0, 24.0, 99.0])
    got = steady.settle(lambda: next(times), min_calls=2)
    assert got == [9000.0, 4000.0, 30.0, 900.0, 25.0, 26.0, 24.0]  # three in a row within 1.5x of the best


def test_settle_stops_at_a_compile_and_honours_the_minimum():
    calls = []

    def call() -> float:
        calls.append(1)
        return 5000.0 / len(calls)

    assert len(steady.settle(call, min_calls=4, compiling=lambda: True)) == 4


def test_calls_per_step_fill_a_step_on_the_cpu_clock_only():
    assert steady.calls_per_step([20.0, 16.0, 16.0, 16.0], device_clock=False) == 25
    assert steady.calls_per_step([16.0] * 3, device_clock=True) == 1
    assert steady.calls_per_step([5000.0] * 3, device_clock=False) == 1
    assert steady.calls_per_step([0.5] * 3, device_clock=False) == steady.MAX_CALLS_PER_STEP


def test_clean_means_no_noticeable_run_queue_wait():
    assert steady.clean(1000.0, 50.0) and steady.clean(1000.0, None)
    assert not steady.clean(1000.0, 200.0)
    assert steady.clean(20.0, 6.0)  # the floor: timer granularity on a tiny step


def _plan(paired=True, active=2):
    return steady.StepPlan(torch, 0, 1, active, paired)


def test_the_plan_is_a_profiler_schedule_that_never_saves_early():
    plan = _plan()
    A = torch.profiler.ProfilerAction
    assert [plan(i) for i in range(6)] == [A.WARMUP, A.RECORD, A.RECORD, A.RECORD, A.RECORD, A.RECORD]
    assert plan.first == 1 and plan.total == 5  # warmup + 2 pairs


def test_the_plan_measures_more_pairs_while_plain_twins_are_disturbed():
    plan = _plan()
    plan.record(0, 100.0, 0.0, 0)  # warmup: not judged
    assert plan.more(0)
    for step, delay in [(1, 0.0), (2, 80.0), (3, 0.0), (4, 0.0)]:  # pair 1's plain twin waited
        plan.record(step, 100.0, delay, 1)
        more = plan.more(step)
    assert more and plan.total == 7  # one more pair
    plan.record(5, 100.0, 90.0, 1)  # a labelled step that waited does not matter
    assert plan.more(5)
    plan.record(6, 100.0, 0.0, 0)
    assert not plan.more(6)
    assert plan.keep() == [False, True, True]
    ev = plan.evidence()
    assert ev["steps_measured"] == 3 and ev["steps_clean"] == 2 and ev["extra_steps"] == 1
    assert ev["run_delay_share"] == pytest.approx(80 / 300, abs=1e-4)


def test_the_plan_stops_at_its_cap_and_then_uses_every_step():
    plan = _plan(paired=False, active=2)
    plan.record(0, 100.0, 0.0, 0)
    step = 1
    while True:
        plan.record(step, 100.0, 90.0, 3)
        if not plan.more(step):
            break
        step += 1
    assert len(plan.samples) == 2 * steady.EXTRA_FACTOR  # capped
    assert plan.keep() is None  # too few clean steps to choose from: all used
    assert plan.evidence()["step_switches"] == 3


def test_ranks_of_a_torchrun_job_make_the_same_calls(monkeypatch):
    """Every rank must call the function the same number of times (its collectives
    pair up call by call): as a rank, nothing adapts to this rank's own timings."""
    monkeypatch.setenv("TRAINIUM_LENS_SPEC_FILE", "/run/spec.json")
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert steady.lockstep()
    uneven = iter([5000.0, 10.0, 900.0, 10.0, 10.0, 10.0])
    assert len(steady.settle(lambda: next(uneven), 2)) == 2  # not "until steady"
    assert steady.calls_per_step([1.0, 1.0, 1.0], device_clock=False) == 1
    plan = _plan(paired=False, active=2)
    plan.record(0, 100.0, 0.0, 0)
    steps = 1
    while True:
        plan.record(steps, 100.0, 90.0, 3)  # every step disturbed: no extra steps all the same
        if not plan.more(steps):
            break
        steps += 1
    assert len(plan.samples) == 2
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert not steady.lockstep()


def test_host_evidence_reads_this_process():
    delay = RunQueueDelay()
    if delay.available:
        first = delay.read_us()
        assert first is not None and delay.read_us() >= first
    delay.close()
    if os.path.exists("/proc/self/stat"):
        assert isinstance(involuntary_switches(), int)
    window = HostWindow().start().stop()
    assert window["others_cores"] is None  # a window shorter than /proc/stat's resolution says nothing


class _Raw:
    def __init__(self, name, start, dur, thread=1):
        self._n, self._s, self._d, self._t = name, start, dur, thread

    def name(self):
        return self._n

    def start_ns(self):
        return self._s

    def duration_ns(self):
        return self._d

    def start_thread_id(self):
        return self._t


def test_calibration_trees_nest_by_time_and_merge_redispatches():
    raw = [
        _Raw("aten::_foreach_add", 0, 10_000),
        _Raw("aten::add", 1_000, 4_000),
        _Raw("aten::add", 1_500, 3_000),  # a redispatch of its parent: one event
        _Raw("aten::to", 2_000, 1_000),
        _Raw("aten::add", 6_000, 2_000),
        _Raw("profiler::step", 0, 20_000, thread=2),  # no op
    ]
    (tree,) = _trees(raw)["aten::_foreach_add"]
    total, events, depths = tree
    assert events == 4 and depths == 0 + 1 + 2 + 1
    assert total == pytest.approx(10.0)  # the whole window, each instant once

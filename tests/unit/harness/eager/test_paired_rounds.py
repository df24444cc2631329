"""harness/eager/paired.py: variants timed in turn, in rounds until their paired
verdict is decided or ``paired_s`` runs out. The clock is a stand-in the two
functions advance by what they "cost" (a synthetic host: no timing asserted): a
clear speedup stops after ``MIN_S``, a ratio that drifts over time runs to the bound
and stays undecided, and without ``paired_s`` the rounds are the fixed count."""

from __future__ import annotations

import contextlib
from types import SimpleNamespace

import pytest

from trainium_lens.harness.eager import measure, paired
from trainium_lens.harness.pairs import FASTER, UNDECIDED


class Clock:
    def __init__(self):
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now

    monotonic = perf_counter


@pytest.fixture
def clock(monkeypatch) -> Clock:
    c = Clock()
    monkeypatch.setattr(measure, "time", c)
    monkeypatch.setattr(paired, "time", c)
    return c


class Call:
    def __init__(self, s, name, cost):
        self.s, self.name, self.args, self.kwargs = s, name, (), {}
        self.fn = cost

    def __call__(self, labelled=False):
        return self.fn()


def session(clock: Clock, before_us, after_us, bound: int, rounds: int = 20):
    """Two variants of one group; ``*_us(t)``: a call's cost at clock time ``t``."""
    s = SimpleNamespace(
        events=SimpleNamespace(stage=lambda *a: None),
        backend=SimpleNamespace(sync=lambda: None),
        include_hooks=SimpleNamespace(suspended=contextlib.nullcontext),
        run_delay=SimpleNamespace(read_us=lambda: None),
        timed={},
    )

    def cost(us):
        def call():
            clock.now += us(clock.now) / 1e6

        return call

    for name, us in (("before", before_us), ("after", after_us)):
        s.timed[name] = ("compare:lens_fix", Call(s, name, cost(us)), 1, rounds, bound)
    docs = [{"function": {"name": n}, "totals": {}} for n in ("before", "after")]
    return s, docs


def test_a_clear_speedup_stops_once_decided_after_the_minimum_time(clock):
    s, docs = session(clock, lambda t: 1000.0, lambda t: 800.0 if int(t * 7) % 3 else 760.0, bound=30)
    paired.time_in_turn(s, docs)
    after = docs[1]
    assert after["totals"]["paired_verdict"] == FASTER
    assert after["totals"]["paired_ratio_low"] >= 1.05 and 1.2 <= after["totals"]["paired_ratio"] <= 1.32
    spent = after["stability"]["paired_s"]
    assert paired.MIN_S <= spent < 5  # decided: long before the 30 s bound
    assert len(after["totals"]["paired_ratios"]) == after["stability"]["paired_rounds"]
    assert "paired_ratios" not in docs[0]["totals"]  # the reference has no ratio to itself


def test_a_ratio_that_drifts_runs_to_the_bound_and_stays_undecided(clock):
    # after costs 0.8x before at first, 1.0x at 1.3 s, 1.7x at 6 s: each pair is exact, but
    # whenever the pool's interval is narrow, the first half's median is in another zone
    s, docs = session(clock, lambda t: 1000.0, lambda t: 800.0 + 150.0 * t, bound=6)
    paired.time_in_turn(s, docs)
    after = docs[1]
    assert after["totals"]["paired_verdict"] == UNDECIDED
    assert after["stability"]["paired_s"] >= 6 and after["stability"]["paired_bound_s"] == 6


def test_without_a_bound_the_rounds_are_the_fixed_count_and_still_give_ratios(clock):
    s, docs = session(clock, lambda t: 1000.0, lambda t: 1000.0, bound=0, rounds=30)
    paired.time_in_turn(s, docs)
    after = docs[1]
    assert after["stability"]["paired_rounds"] == 30 and len(after["totals"]["paired_ratios"]) == 30
    assert after["totals"]["paired_ratio"] == pytest.approx(1.0)

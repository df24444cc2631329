"""An asynchronous instruction's untraced work (harness/xla/async_work.py): XLA's CPU
runtime traces a dot's dispatch only; its contraction runs as untraced pool tasks
until its ``end:`` event. The pieces a pool thread worked outside traced
instructions go to the instruction in flight, and its time then covers them."""

from __future__ import annotations

import pytest

from trainium_lens.harness.intervals import union_length
from trainium_lens.harness.xla import async_work
from trainium_lens.harness.xla.attribution import own_intervals
from trainium_lens.harness.xla.xplane import Capture, Executed

POOL_A, POOL_B, CLIENT = "tf_XLAEigen/1", "tf_XLAEigen/2", "tf_XLAPjRtCpuClient/1"
US = 1000.0


def ev(name: str, start_us: float, end_us: float, thread: str = POOL_A) -> Executed:
    return Executed(start_us * US, end_us * US, name, "m", 1, thread)


def capture(events: list[Executed], ends: dict[str, list[float]], regions: dict) -> Capture:
    return Capture(
        executed=events,
        ends={k: [t * US for t in v] for k, v in ends.items()},
        regions={t: [(a * US, b * US) for a, b in r] for t, r in regions.items()},
    )


def test_a_dots_untraced_contraction_is_its_time_not_the_neighbours() -> None:
    # the dot dispatches in 10 µs; its contraction runs on both pool threads until its end
    # at 100 µs, while a small add runs traced on thread A at 50-60 µs
    events = [ev("dot.1", 0, 10), ev("add.2", 50, 60)]
    cap = capture(
        events,
        {"dot.1": [100], "add.2": [59.9]},
        {POOL_A: [(10, 100)], POOL_B: [(20, 90)], CLIENT: [(0, 200)]},  # the client only waits
    )
    got = async_work.assign(cap, events)
    assert set(got) == {0}  # the add is synchronous: its end is inside its event
    own = own_intervals(events)
    total = [own[i] + got.get(i, []) for i in range(2)]
    assert union_length(total[0]) / US == pytest.approx(100.0)  # 0-10 traced, 10-100 untraced
    assert union_length(total[1]) / US == pytest.approx(10.0)  # the add keeps its own time


def test_work_goes_to_the_instruction_that_completes_first_and_none_without_one() -> None:
    events = [ev("dot.1", 0, 5), ev("dot.2", 6, 10)]
    cap = capture(events, {"dot.1": [40], "dot.2": [80]}, {POOL_B: [(0, 120)]})
    got = async_work.assign(cap, events)
    assert sorted(got[0]) == [(0.0, 40 * US)]  # dot.1 in flight until 40: it finishes first
    assert sorted(got[1]) == [(40 * US, 80 * US)]
    # 80-120: nothing in flight, the work stays untraced (no instruction's)
    assert sum(b - a for v in got.values() for a, b in v) == pytest.approx(80 * US)


def test_a_run_without_runtime_events_is_unchanged() -> None:
    events = [ev("dot.1", 0, 10)]
    assert async_work.assign(capture(events, {}, {}), events) == {}

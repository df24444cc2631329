"""The calibration's subtraction, bounded by the unprofiled wall
(attribution/build.py, ``calibration_kept``): the per-event cost is read once per
run and drifts with the host; when the raw sum is above the wall and the
calibrated one below it, only the share the wall leaves room for is kept."""

from __future__ import annotations

import pytest

from trainium_lens.harness.attribution.bounded import PASSES, WITHIN, per_level_cost
from trainium_lens.harness.attribution.build import RAISE_MAX, calibration_kept, calibration_raised


def figures(ops: float, host: float, measured: bool = True) -> dict:
    return {"self_time_us": ops, "host_time_us": host, "host_measured": measured}


def test_a_calibration_that_takes_the_sum_below_the_wall_is_kept_only_in_part():
    # the fresh clone's fused RMSNorm: 7.7 µs of calibrated ops, 26.3 µs subtracted, a 19 µs wall
    kept = calibration_kept(figures(7.7, 2.0), 26.3, [19.0], None)
    assert kept == pytest.approx(1 - (19.0 - 9.7) / 26.3)
    # what is then subtracted leaves the sum at the wall
    assert 7.7 + 2.0 + (1 - kept) * 26.3 == pytest.approx(19.0)


def test_sums_that_do_not_straddle_the_wall_keep_the_whole_calibration():
    assert calibration_kept(figures(15.0, 3.0), 10.0, [17.0], None) == 1.0  # calibrated at or above it
    # raw below the wall too: time no gap sees (Python before the first op) fills it
    assert calibration_kept(figures(5.0, 1.0), 3.0, [1000.0], None) == 1.0
    assert calibration_kept(figures(5.0, 1.0), 0.0, [19.0], None) == 1.0  # nothing subtracted
    assert calibration_kept(figures(7.7, 2.0, measured=False), 26.3, [19.0], None) == 1.0  # ops alone
    assert calibration_kept(figures(7.7, 2.0), 26.3, [], None) == 1.0  # no wall


def test_a_disturbed_wall_bounds_no_calibration():
    disturbed = {"timing_calls": 20, "timing_clean": 4}
    assert calibration_kept(figures(7.7, 2.0), 26.3, [19.0], disturbed) == 1.0
    clean = {"timing_calls": 20, "timing_clean": 20}
    assert calibration_kept(figures(7.7, 2.0), 26.3, [19.0], clean) < 1.0


# What a per-level cost subtracts from a function of small nested ops: each op loses
# cost × its depth, settled at 0 (the shape of attribution/walk.py's subtraction).
OPS = [(0.3 + 0.25 * i, 1 + i % 3) for i in range(20)]  # (self µs, depth)


def subtraction(cost: float) -> float:
    return sum(min(t, cost * depth) for t, depth in OPS)


def test_the_bounded_cost_subtracts_the_aim_where_most_ops_settle_at_zero():
    for read in (0.5, 3.0, 30.0):  # a modest reading, and ones that take every op to 0
        walks: list[float] = []

        def walk(cost: float, walks: list[float] = walks) -> tuple[str, float]:
            walks.append(cost)
            return f"walk {len(walks)}", subtraction(cost)

        subtracted = subtraction(read)
        aim = 0.3 * subtracted
        result, cost = per_level_cost(walk, (0.0, 0.0), (read, subtracted), aim)
        assert subtraction(cost) == pytest.approx(aim, rel=WITHIN), (read, walks)
        assert result == f"walk {len(walks)}" and cost == walks[-1]  # the walk that used it
        assert len(walks) <= PASSES


def test_when_the_passes_run_out_the_closest_walk_under_the_aim_is_kept():
    # a subtraction that jumps past the aim: no cost lands within 1% of it
    def walk(cost: float) -> tuple[float, float]:
        return cost, 0.0 if cost < 1.0 else 10.0

    result, cost = per_level_cost(walk, (0.0, 0.0), (2.0, 10.0), 5.0)
    assert result == cost and cost < 1.0  # it took nothing rather than twice the room
    assert cost > 0.9  # and the closest such cost the passes found


def test_the_bounded_cost_raises_a_reading_towards_a_higher_aim():
    # an under-read calibration: the aim lies between the cost read and a higher one
    read = 0.3
    walks: list[float] = []

    def walk(cost: float) -> tuple[float, float]:
        walks.append(cost)
        return cost, subtraction(cost)

    aim = 1.2 * subtraction(read)
    result, cost = per_level_cost(walk, (read, subtraction(read)), (1.5 * read, subtraction(1.5 * read)), aim)
    assert read < cost < 1.5 * read and subtraction(cost) == pytest.approx(aim, rel=WITHIN)
    assert len(walks) <= PASSES


STEADY_RUN = {"timing_calls": 20, "timing_clean": 20}


def test_ops_above_a_steady_wall_raise_the_calibration_to_meet_it():
    # the fused RMSNorm on a steady machine: calibrated ops 13.5 µs, 5.3 µs subtracted, wall 11.6 µs
    raised = calibration_raised(figures(13.5, 1.2), 5.3, [11.5, 11.6, 11.7], STEADY_RUN, 11.6)
    assert raised == pytest.approx(1 + (13.5 - 11.6) / 5.3)
    # subtracting that much more leaves the ops at the wall
    assert 13.5 - (raised - 1) * 5.3 == pytest.approx(11.6)


def test_the_raise_is_capped_and_needs_a_run_that_held_one_speed():
    # ops far above the wall: the raise stops at the cap, and the figure stays above it
    assert calibration_raised(figures(40.0, 1.0), 5.0, [11.6], STEADY_RUN, 11.6) == RAISE_MAX
    # the calls just before the steps 1.7x the timing calls: the steps may have met the slower speed
    assert calibration_raised(figures(13.5, 1.2), 5.3, [11.6], STEADY_RUN, 19.7) == 1.0
    assert calibration_raised(figures(13.5, 1.2), 5.3, [11.6], STEADY_RUN, None) == 1.0  # not timed
    disturbed = {"timing_calls": 20, "timing_clean": 4}
    assert calibration_raised(figures(13.5, 1.2), 5.3, [11.6], disturbed, 11.6) == 1.0
    # ops within the wall, or no host time read: nothing to raise
    assert calibration_raised(figures(10.0, 1.2), 5.3, [11.6], STEADY_RUN, 11.6) == 1.0
    assert calibration_raised(figures(13.5, 1.2, measured=False), 5.3, [11.6], STEADY_RUN, 11.6) == 1.0

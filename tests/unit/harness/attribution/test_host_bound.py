"""The host time between ops, bounded by the unprofiled wall (attribution/build.py,
``host_scale``): the gaps are read under the profiler, where Python runs slower;
what the wall leaves beside the ops bounds them, unless the wall was disturbed."""

from __future__ import annotations

import pytest

from trainium_lens.harness.attribution.build import host_scale


def figures(ops: float, host: float, measured: bool = True) -> dict:
    return {"self_time_us": ops, "host_time_us": host, "host_measured": measured}


def test_gaps_that_read_more_than_the_wall_leaves_are_scaled_to_it():
    # the bundled RMSNorm on a quiet CPU: 13.9 µs of ops, gaps of 3.6 µs, a 16.1 µs wall
    assert host_scale(figures(13.9, 3.6), [16.0, 16.1, 16.3], None) == pytest.approx(2.2 / 3.6)


def test_gaps_that_fit_are_left_as_read():
    assert host_scale(figures(10.0, 3.0), [14.0], None) == 1.0
    assert host_scale(figures(10.0, 0.0), [14.0], None) == 1.0  # nothing read
    assert host_scale(figures(10.0, 3.0, measured=False), [11.0], None) == 1.0
    assert host_scale(figures(10.0, 3.0), [], None) == 1.0  # no wall (a script mid-run)


def test_ops_that_already_exceed_the_wall_leave_no_host_time():
    assert host_scale(figures(20.0, 3.0), [16.0], None) == 0.0


def test_a_disturbed_wall_bounds_nothing():
    disturbed = {"timing_calls": 20, "timing_clean": 4}
    assert host_scale(figures(13.9, 3.6), [16.1], disturbed) == 1.0
    clean = {"timing_calls": 20, "timing_clean": 18}
    assert host_scale(figures(13.9, 3.6), [16.1], clean) < 1.0

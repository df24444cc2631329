"""A line above the xla-cpu FLOP/s peak (harness/xla/roof.py): its FLOPs are exact
counts, so the warning names the measure that is off — the roof when it was measured
on a busy host, else the line's time; lines under the peak say nothing."""

from __future__ import annotations

from trainium_lens.harness.xla.roof import above, achieved

ROOF = {"flops": [{"dtype": "float32", "flops_per_s": 100e9}], "bytes_per_s": 10e9}


def line(n: int, flops: float, us: float, backward_flops: float = 0.0, backward_us: float = 0.0) -> dict:
    return {
        "file": "model.py",
        "line": n,
        "dtype": "float32",
        "flops": flops,
        "self_time_us_median": us,
        "backward_flops": backward_flops,
        "backward_self_time_us_median": backward_us,
    }


def test_a_backward_above_the_peak_names_the_time_on_a_quiet_roof_and_the_roof_on_a_busy_one() -> None:
    lines = [line(10, 50e6, 1000.0, 240e6, 2000.0), line(11, 1e6, 100.0)]  # backward at 120 %
    [quiet] = above(lines, ROOF)
    assert quiet.startswith("model.py:10 backward reads 120% of the FLOP/s peak")
    assert "the measure that is off is the time" in quiet
    [busy] = above(lines, dict(ROOF, busy=True))
    assert "the measure that is off is the roof" in busy


def test_achieved_counts_backward_so_a_fast_backward_sends_the_roof_to_be_measured_again() -> None:
    got = achieved([line(10, 50e6, 1000.0, 240e6, 2000.0)])
    assert got["flops"]["float32"] == 120e9 and got["bytes_per_s"] == 0.0
    assert above([line(10, 50e6, 1000.0)], ROOF) == [] and above([line(10, 1e9, 1.0)], None) == []

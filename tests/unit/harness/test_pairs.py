"""harness/pairs.py: the paired verdict from synthetic per-pair ratios (no timing).

The samples are drawn from a seeded generator: a clear speedup, the same code, a
clear slowdown, a burst of other load on a third of the pairs, and a host whose
load changes what the two versions cost over time (the ratio itself drifts)."""

from __future__ import annotations

import math
import random

from trainium_lens.harness.pairs import FASTER, GAIN, SAME, SLOWER, UNDECIDED, interval, judge, zone


def noisy(center: float, n: int, spread: float = 0.04, seed: int = 0) -> list[float]:
    rng = random.Random(seed)
    return [center * math.exp(rng.gauss(0.0, spread)) for _ in range(n)]


def test_the_interval_is_the_sign_tests_order_statistics():
    # n = 20 at 99 %: P(Bin(20, 1/2) <= 3) = 1351/2^20 = 0.0013 <= 0.005 < P(<= 4) = 0.0059
    assert interval([float(i) for i in range(1, 21)]) == (4.0, 17.0)
    assert interval([1.0] * 7) is None  # 2 * 2^-7 = 1.6 % > 1 %: no interval at 99 %
    bounds = interval(noisy(1.0, 5000))  # the normal approximation above 120
    assert bounds is not None and bounds[0] < 1.0 < bounds[1] and bounds[1] - bounds[0] < 0.01


def test_a_clear_speedup_is_faster_with_its_interval_clear_of_the_threshold():
    v = judge(noisy(1.30, 200))
    assert v.verdict == FASTER and v.low is not None and v.low >= GAIN
    assert abs(v.ratio - 1.30) < 0.02 and v.pairs == 200


def test_the_same_code_is_the_same_within_the_threshold():
    v = judge(noisy(1.00, 400))
    assert v.verdict == SAME and 1 / GAIN <= v.low <= 1.0 <= v.high <= GAIN


def test_a_clear_slowdown_is_slower():
    assert judge(noisy(0.80, 200)).verdict == SLOWER


def test_bursts_on_one_side_of_a_third_of_the_pairs_do_not_move_the_median():
    ratios = noisy(1.30, 300)
    rng = random.Random(1)
    hit = [r * (3.0 if rng.random() < 0.5 else 1 / 3.0) if i % 3 == 0 else r for i, r in enumerate(ratios)]
    v = judge(hit)
    assert v.verdict == FASTER and abs(v.ratio - 1.30) < 0.08


def test_a_host_whose_load_drifts_the_ratio_is_undecided_though_the_pool_is_narrow():
    # the ratio slides from 1.25 to 0.75 over the pairs: pooled, the interval sits
    # tightly around 1.0 ("same"); neither half saw 1.0
    n = 2000
    ratios = [1.25 - 0.5 * i / n for i in range(n)]
    bounds = interval(ratios)
    assert bounds is not None and zone(*bounds) == SAME
    v = judge(ratios)
    assert v.verdict == UNDECIDED and v.halves is not None and v.halves[0] > GAIN > 1 / GAIN > v.halves[1]


def test_too_few_pairs_or_an_interval_across_the_threshold_is_undecided():
    assert judge(noisy(1.30, 10)).verdict == UNDECIDED  # under MIN_PAIRS
    assert judge([]).verdict == UNDECIDED and judge([]).ratio is None
    wide = judge(noisy(1.05, 60, spread=0.3))
    assert wide.verdict == UNDECIDED and wide.low < GAIN < wide.high
    assert judge([0.0, math.inf, -1.0]).pairs == 0  # no ratio of a zero or broken sample


def test_a_size_is_one_figure_only_within_15_percent():
    assert judge(noisy(1.30, 400)).precise and judge(noisy(1.30, 400)).settled
    wide = judge(noisy(2.0, 40, spread=0.6))
    assert wide.verdict == FASTER and not wide.precise and not wide.settled

"""The one-sided Mann–Whitney test against brute force (every split of the pooled
values enumerated) and against its normal approximation."""

from __future__ import annotations

import itertools
import random

import pytest

from trainium_lens.analysis.gate.mann_whitney import EXACT_MAX, greater_p, smallest_p


def brute_force(after: list[float], before: list[float]) -> float:
    """P(rank sum of a random size-n subset ≥ the observed one), ties as mid-ranks."""
    pooled = after + before
    order = sorted(pooled)

    def midrank(v: float) -> float:
        first = order.index(v) + 1
        last = len(order) - order[::-1].index(v)
        return (first + last) / 2

    ranks = [midrank(v) for v in pooled]
    observed = sum(ranks[: len(after)])
    splits = list(itertools.combinations(range(len(pooled)), len(after)))
    hits = sum(1 for idx in splits if sum(ranks[i] for i in idx) >= observed - 1e-9)
    return hits / len(splits)


def test_exact_matches_brute_force_with_ties():
    rng = random.Random(7)
    for _ in range(300):
        after = [float(rng.randint(1, 5)) for _ in range(rng.randint(1, 6))]
        before = [float(rng.randint(1, 5)) for _ in range(rng.randint(1, 6))]
        assert greater_p(after, before) == pytest.approx(brute_force(after, before), abs=1e-12)


def test_complete_separation_reaches_the_smallest_p():
    after, before = [10.0, 11.0, 12.0, 13.0, 14.0], [1.0, 2.0, 3.0, 4.0, 5.0]
    assert greater_p(after, before) == pytest.approx(smallest_p(5, 5)) == pytest.approx(1 / 252)
    assert greater_p(before, after) == pytest.approx(1.0)  # one-sided: the other way is no evidence


def test_normal_approximation_is_close_to_exact_beyond_the_exact_range():
    rng = random.Random(3)
    n = EXACT_MAX // 2 + 5  # both sides: past the exact range
    before = [rng.gauss(100, 10) for _ in range(n)]
    after = [rng.gauss(108, 10) for _ in range(n)]
    approx = greater_p(after, before)
    # the same data thinned into the exact range tells the same story at the same order
    assert 0 < approx < 0.05
    same = [rng.gauss(100, 10) for _ in range(n)]
    assert greater_p(same, before) > 0.01


def test_empty_and_constant_samples_say_nothing():
    assert greater_p([], [1.0]) == 1.0
    assert greater_p([1.0], []) == 1.0
    many = [5.0] * (EXACT_MAX + 2)
    assert greater_p(many[: len(many) // 2], many[len(many) // 2 :]) == 1.0
    assert smallest_p(3, 3) == pytest.approx(1 / 20)

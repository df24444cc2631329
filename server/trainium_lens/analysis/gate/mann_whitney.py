"""The Mann–Whitney U (Wilcoxon rank-sum) test, one-sided, standard library only.

The regression gate (``gate.py``) asks of two sets of per-step times: is the
second *stochastically larger* than the first? A rank test assumes no shape
for the distributions — step times on a busy host are skewed, with long
tails — and one outlier moves a rank by one, not a mean by a lot.

Exact p-values (the permutation distribution of the rank sum, ties as
mid-ranks, by dynamic programming) when both sides are small, which is the
case that matters (a run measures 5–20 steps); the normal approximation with
the tie correction beyond ``EXACT_MAX`` values in all.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

EXACT_MAX = 40  # values in both samples together; beyond, the normal approximation


def smallest_p(n: int, m: int) -> float:
    """The smallest one-sided p-value samples of sizes ``n`` and ``m`` can give
    (complete separation): 1 / C(n + m, n). A test at level alpha below it can
    never reject, whatever the data."""
    if n <= 0 or m <= 0:
        return 1.0
    return 1.0 / math.comb(n + m, n)


def _doubled_midranks(values: list[float]) -> list[int]:
    """Twice each value's mid-rank (1-based) in ``values``: integers, ties shared."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        doubled = (i + 1) + (j + 1)  # 2 × mean of ranks i+1 .. j+1
        for k in range(i, j + 1):
            ranks[order[k]] = doubled
        i = j + 1
    return ranks


def greater_p(after: Sequence[float], before: Sequence[float]) -> float:
    """One-sided p-value of "``after`` tends to be larger than ``before``": the
    probability, if both came from one distribution, of a rank sum of ``after``
    at least this large. 1.0 when either side is empty."""
    a, b = [float(x) for x in after], [float(x) for x in before]
    n, m = len(a), len(b)
    if not n or not m:
        return 1.0
    ranks = _doubled_midranks(a + b)
    observed = sum(ranks[:n])
    if n + m <= EXACT_MAX:
        return _exact_upper(ranks, n, observed)
    return _normal_upper(ranks, n, m, observed)


def _exact_upper(ranks: list[int], n: int, observed: int) -> float:
    """P(sum of ``n`` of ``ranks`` drawn without replacement ≥ ``observed``)."""
    # counts[k][s]: subsets of size k of the ranks seen so far with doubled sum s
    counts: list[dict[int, int]] = [{0: 1}] + [{} for _ in range(n)]
    for r in ranks:
        for k in range(n, 0, -1):
            below = counts[k - 1]
            if not below:
                continue
            here = counts[k]
            for s, c in below.items():
                here[s + r] = here.get(s + r, 0) + c
    total = math.comb(len(ranks), n)
    at_least = sum(c for s, c in counts[n].items() if s >= observed)
    return at_least / total


def _normal_upper(ranks: list[int], n: int, m: int, observed: int) -> float:
    big_n = n + m
    rank_sum = observed / 2.0
    u = rank_sum - n * (n + 1) / 2.0
    mean = n * m / 2.0
    ties: dict[int, int] = {}
    for r in ranks:
        ties[r] = ties.get(r, 0) + 1
    tie_term = sum(t**3 - t for t in ties.values()) / (big_n * (big_n - 1))
    var = n * m / 12.0 * ((big_n + 1) - tie_term)
    if var <= 0:
        return 1.0  # every value equal: no evidence either way
    z = (u - mean - 0.5) / math.sqrt(var)  # continuity correction
    return 0.5 * math.erfc(z / math.sqrt(2.0))

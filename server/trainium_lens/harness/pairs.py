"""The paired verdict: two versions of a computation timed in turn, one ratio per
pair, and what those ratios allow one to say. Pure standard library: the harness
uses it to decide when it has timed enough (``eager/paired.py``,
``eager/optim_trials.py``), and the core to report the verdict from the ratios
the harness recorded (``engine/fixes.py``) — one rule on both sides.

Why pairs: on a shared host the machine speeds up and slows down by tens of
percent within seconds, so two blocks of timing, or two medians taken over the
same stretch, move with the host (``fix`` of an edit that times 0.99–1.01× on a
quiet host read 1.13× slower to 1.22× faster on a busy one, docs/fixes.md). A
*pair* is one sample of each version taken back to back, so the host's speed is
nearly the same for both; its ratio (reference / this: above 1, this is
faster) cancels the drift.

The figure is the **median of the per-pair ratios**, not the ratio of the two
medians: a burst of other load lands on one sample of a pair and makes that one
ratio an outlier, which the median ignores, and the median of ratios has an
interval that assumes nothing of their distribution (the sign test's: order
statistics of the sorted ratios, ``interval``). The ratio of medians throws the
pairing away: the drift is back in it.

The verdict (``judge``) with ``gain`` g (1.05: a fix must be 5 % faster):

* ``faster``: the interval's low end is at least g;
* ``slower``: its high end is at most 1/g;
* ``same``: the whole interval is within 1/g … g (the same within ±5 %);
* otherwise ``undecided``: more pairs may narrow it. Also undecided while either
  half of the pairs (the first and the second, in time) has its median outside
  the verdict's range: a host whose load changes what the two versions cost
  differently over time (the ratio itself drifts) pools into a narrow interval
  around a figure neither half saw.

A verdict's **size** is stated as one figure only when the interval lies within
±15 % of the median (``precise``); else as the interval ("faster, by 1.1–2.8×": the
size not measurable to ±15 % on this host now). The rounds go on for that too, to
the time bound.

``CONFIDENCE`` is 99 %, not 95 %: the interval is looked at after every round
(``eager/paired.py`` stops at the first verdict), and each look is another chance
of a wrong one.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

FASTER = "faster"
SLOWER = "slower"
SAME = "same"
UNDECIDED = "undecided"

GAIN = 1.05  # faster by less is within what two runs of the same code differ by (docs/fixes.md)
CONFIDENCE = 0.99
PRECISION = 1.15  # a size is one figure when the interval is within ±15 % of it
MIN_PAIRS = 20  # fewer: the halves' medians are too coarse to tell drift from noise
_EXACT_UP_TO = 120  # the binomial exactly (integers); above it, its normal approximation


@dataclass
class Verdict:
    ratio: float | None  # median of the per-pair ratios; None without pairs
    low: float | None  # its interval at ``CONFIDENCE``; None: too few pairs for one
    high: float | None
    pairs: int
    verdict: str  # FASTER | SLOWER | SAME | UNDECIDED
    halves: tuple[float, float] | None = None  # the first and second halves' medians

    @property
    def precise(self) -> bool:
        """The interval within ``PRECISION`` of the median, both ways."""
        if self.ratio is None or self.low is None or self.high is None or self.low <= 0:
            return False
        return self.high <= self.ratio * PRECISION and self.low * PRECISION >= self.ratio

    @property
    def settled(self) -> bool:
        """Nothing more to time for: a verdict, and its size to ±15 %."""
        return self.verdict != UNDECIDED and self.precise


def interval(values: list[float], confidence: float = CONFIDENCE) -> tuple[float, float] | None:
    """The distribution-free interval of the median: ``[x_(j), x_(n-j+1)]`` of the sorted
    values, ``j`` the largest with P(Binomial(n, ½) < j) ≤ (1 − confidence) / 2. None
    when ``n`` is too small for any (7 values at 99 %)."""
    n = len(values)
    if n == 0:
        return None
    tail = (1 - confidence) / 2
    if n <= _EXACT_UP_TO:
        total = 1 << n
        below, j = 0, 0  # below = sum of C(n, i) for i < j
        while j < n and (below + math.comb(n, j)) / total <= tail:
            below += math.comb(n, j)
            j += 1
    else:
        z = statistics.NormalDist().inv_cdf(1 - tail)
        j = math.floor(n / 2 - z * math.sqrt(n) / 2)  # continuity: floor keeps it conservative
    if j < 1:
        return None
    ordered = sorted(values)
    return ordered[j - 1], ordered[n - j]


def zone(low: float, high: float, gain: float = GAIN) -> str:
    """What an interval (or a single figure, ``low == high``) says."""
    if low >= gain:
        return FASTER
    if high <= 1 / gain:
        return SLOWER
    if low >= 1 / gain and high <= gain:
        return SAME
    return UNDECIDED


def judge(ratios: list[float], gain: float = GAIN, confidence: float = CONFIDENCE) -> Verdict:
    """The verdict of per-pair ratios (reference / this), in the order they were taken."""
    ratios = [r for r in ratios if r > 0 and math.isfinite(r)]
    n = len(ratios)
    if not n:
        return Verdict(None, None, None, 0, UNDECIDED)
    ratio = statistics.median(ratios)
    bounds = interval(ratios, confidence)
    half = n // 2
    halves = (statistics.median(ratios[:half]), statistics.median(ratios[half:])) if half else None
    if bounds is None or n < MIN_PAIRS or halves is None:
        low, high = bounds if bounds else (None, None)
        return Verdict(ratio, low, high, n, UNDECIDED, halves)
    low, high = bounds
    verdict = zone(low, high, gain)
    if verdict != UNDECIDED and any(zone(h, h, gain) != verdict for h in halves):
        verdict = UNDECIDED  # the ratio itself moved over time: not one figure to report
    return Verdict(ratio, low, high, n, verdict, halves)


def pair_ratios(reference: list[float], this: list[float]) -> list[float]:
    """Per pair, reference / this (pairs where either is 0 are dropped)."""
    return [a / b for a, b in zip(reference, this, strict=False) if a > 0 and b > 0]

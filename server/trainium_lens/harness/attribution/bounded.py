"""The per-level profiler cost that subtracts a given amount: the calibration
bounded by the unprofiled wall (``build.calibration_kept`` and
``build.calibration_raised`` give the amount, ``eager/run.py`` walks the profile
again with the cost found here).

What a per-level cost subtracts is not linear in it: an op the cost would take
below 0 is settled at 0, so the subtraction flattens as the cost grows. Plain
false position between no cost (nothing subtracted) and the cost read (all of
it) keeps the no-cost end while every pass lands above the aim, and where most
ops settle at 0 it crept towards the aim: on a fresh CI machine the bundled
fused RMSNorm under a 4× reading ended 7% below its wall after four passes, and
a 30× reading here 14%. Illinois' variant halves the end that stays put, so
the bracket closes from both sides."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

PASSES = 8  # walks at most; 2 on the bundled example at a 4x reading, 6 at 100x
WITHIN = 0.01  # of the aim


def per_level_cost(
    walk: Callable[[float], tuple[T, float]],
    low: tuple[float, float],
    high: tuple[float, float],
    aim: float,
) -> tuple[T | None, float]:
    """The walk whose subtraction is within 1% of ``aim`` and the cost it used.
    ``walk(cost)`` returns its result and what it subtracted; ``low`` and ``high``
    are (cost, subtracted) on either side of the aim (no cost subtracts nothing;
    the cost read subtracted what it did). If the passes run out first: the
    closest pass that took no more than the aim, else the last."""
    low = (low[0], low[1] - aim)  # (cost, subtracted less the aim)
    high = (high[0], high[1] - aim)

    def secant() -> float:  # where the line between the two ends meets the aim
        return low[0] - low[1] * (high[0] - low[0]) / (high[1] - low[1])

    cost = secant() if high[1] > low[1] else high[0]
    moved = 0  # the end the last pass moved: -1 low, +1 high
    under: tuple[Any, float] | None = None
    last: tuple[Any, float] = (None, cost)
    for _ in range(PASSES):
        result, got = walk(cost)
        last = (result, cost)
        miss = got - aim
        if abs(miss) <= WITHIN * aim:
            return result, cost
        if miss < 0:
            low = (cost, miss)
            if under is None or cost > under[1]:
                under = (result, cost)
            if moved == -1:
                high = (high[0], high[1] / 2)
            moved = -1
        else:
            high = (cost, miss)
            if moved == 1:
                low = (low[0], low[1] / 2)
            moved = 1
        if high[1] <= low[1]:
            break
        cost = secant()
    return under if under is not None else last

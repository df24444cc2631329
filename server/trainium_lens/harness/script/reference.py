"""Which unprofiled steps of a script are its reference (docs/scripts.md, "The window").

The hooks time every step from one boundary to the next: steps 2..N−1 before the
window and, after the work step, up to ``SETTLE + AFTER`` more. Not all of them are
the script's steady step:

* step 2 still warms up (measured: Lightning's second batch 2.2× its steady one,
  ``tests/data/scripts/lit.py``, in the script's own timer without the tool);
* the ``SETTLE`` steps right after the work step pay for the harness's own work at
  the window's end (attribution, the work step's recording): on the same script
  (one run, load about 4.5 on 2 cores), its own timer showed them at 1.1–4.6× its
  steady step under the tool, the steps after them as without it.

So the reference is the steps before the window from step 3 on and the steps
after the settling ones. A script too short for that (or ``--exit-after``, which
ends at the work step) falls back on every step timed, step 2 and the settling
steps included, rather than on none.
"""

from __future__ import annotations

SETTLE = 3  # unprofiled steps after the work step left out of the reference
AFTER = 5  # unprofiled steps timed after those: the rest of the reference
ENOUGH = 2  # fewer representative steps than this: every step timed counts


def last_timed(window_last: int) -> int:
    """The last step the hooks time (the batch is written at its end)."""
    return window_last + 1 + SETTLE + AFTER


def chosen(
    before: list[tuple[int, float]], after: list[tuple[int, float]], window_last: int
) -> tuple[list[float], list[float]]:
    """The walls (µs) of the reference: ``before``/``after`` are (step, wall) pairs."""
    keep = chosen_steps([k for k, _ in before], [k for k, _ in after], window_last)
    return [w for k, w in before if k in keep], [w for k, w in after if k in keep]


def chosen_steps(before: list[int], after: list[int], window_last: int) -> set[int]:
    """The reference's step numbers among those timed before and after the window:
    each figure of the reference (its wall, its wait for data) is a median over
    these same steps, so a step's wait never outweighs its wall."""
    steady = {k for k in before if k >= 3} | {k for k in after if k > window_last + 1 + SETTLE}
    return steady if len(steady) >= ENOUGH else set(before) | set(after)

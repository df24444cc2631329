"""``harness/script/reference.py``: which unprofiled steps a script's reference
takes — from step 3 on before the window, after the settling steps after it —
and every step timed when those are too few."""

from __future__ import annotations

from trainium_lens.harness.script.reference import AFTER, SETTLE, chosen, chosen_steps, last_timed


def test_step_2_and_the_settling_steps_are_left_out() -> None:
    window_last = 8  # --steps 3:5 on the cpu clock; step 9 is the work step
    before = [(2, 40.0)]
    after = [(k, 30.0 if k <= 9 + SETTLE else 10.0 + k) for k in range(11, last_timed(window_last) + 1)]
    b, a = chosen(before, after, window_last)
    assert b == [] and a == [10.0 + k for k in range(10 + SETTLE, 10 + SETTLE + AFTER)]
    assert len(a) == AFTER


def test_steps_before_the_window_from_step_3_count() -> None:
    b, a = chosen([(2, 40.0), (3, 11.0), (4, 12.0)], [(10, 30.0)], window_last=10)
    assert (b, a) == ([11.0, 12.0], [])


def test_a_short_script_falls_back_on_every_step_timed() -> None:
    # --steps 3:5 in a 12-step script: step 2 and steps 10-12, all settling
    after = [(10, 30.0), (11, 20.0), (12, 25.0)]
    assert chosen([(2, 40.0)], after, window_last=8) == ([40.0], [30.0, 20.0, 25.0])
    assert chosen([], [], window_last=8) == ([], [])


def test_the_steps_chosen_are_the_walls_steps() -> None:
    # every figure of the reference is over the same steps: a settling step's long
    # wait for data must not be set against the steady steps' walls
    before, after = [(2, 40.0), (3, 11.0)], [(9 + k, 30.0) for k in range(1, SETTLE + 3)]
    keep = chosen_steps([k for k, _ in before], [k for k, _ in after], window_last=8)
    b, a = chosen(before, after, window_last=8)
    assert keep == {3, 9 + SETTLE + 1, 9 + SETTLE + 2}
    assert b == [w for k, w in before if k in keep] and len(a) == 2

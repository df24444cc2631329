"""Which cells loop over their own steps (``cell.loops_over_steps``): run once with
their loop's steps profiled, as ``run`` profiles a script's; every other cell is one
step, run repeatedly (docs/notebooks.md)."""

from __future__ import annotations

import pytest

from trainium_lens.errors import UsageError
from trainium_lens.notebook.cell import loops_over_steps
from trainium_lens.notebook.options import parse

LOOPS = [
    "for i in range(20):\n    loss = model(x).sum(); loss.backward(); opt.step(); opt.zero_grad()",
    "while step < 100:\n    train_step(batch)\n    step += 1",
    "for batch in loader:\n    with torch.autocast('cpu'):\n        loss = f(batch)\n"
    "    if ok:\n        xm.optimizer_step(opt)",
    "model.train()\nfor epoch in range(2):\n    for b in loader:\n        sched.step()",
]
ONE_STEP = [
    "out = model(x)\nloss = out.sum()\nloss.backward()\nopt.step()",
    "for layer in layers:\n    x = layer(x)\nopt.step()",  # a loop, but the step is after it
    "def train(n):\n    for i in range(n):\n        opt.step()",  # only defined here
    "class T:\n    def fit(self):\n        while True:\n            self.opt.step()",
    "for micro in chunks:\n    model(micro).sum().backward()\nopt.step()",
    "steps = [lambda: opt.step() for _ in range(3)]",  # a comprehension is no loop statement
    "out = model(x\n",  # a syntax error: compiled later, where the error is the user's
]


@pytest.mark.parametrize("body", LOOPS)
def test_a_loop_calling_a_step_loops_over_its_steps(body: str) -> None:
    assert loops_over_steps(body)


@pytest.mark.parametrize("body", ONE_STEP)
def test_every_other_cell_is_one_step(body: str) -> None:
    assert not loops_over_steps(body)


def test_the_user_says_otherwise_with_loop_or_one_step() -> None:
    assert parse("").loop is None and parse("--loop").loop is True and parse("--one-step").loop is False
    assert parse("--steps 4:6").steps == (4, 6)
    with pytest.raises(UsageError, match="not allowed with argument"):
        parse("--loop --one-step")

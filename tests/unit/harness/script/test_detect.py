"""``harness/script/detect.py``: the global module hooks that find an inference
loop's steps leave once an optimizer counts (each global hook puts every module
call on torch's slow path: 1.27× a 25-module forward, measured), and the
optimizer's steps are counted once each."""

from __future__ import annotations

import os
import sys
import types
import warnings

import pytest
import torch
from torch.nn.modules import module as mod

from trainium_lens.harness.script.detect import Detector


def _model() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))


def test_a_training_loop_drops_the_forward_hooks_at_its_first_optimizer_step():
    seen: list[str] = []
    d = Detector(seen.append, None, "/nowhere")
    before = (len(mod._global_forward_pre_hooks), len(mod._global_forward_hooks))
    d.install()
    try:
        model = _model()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        assert len(mod._global_forward_hooks) == before[1] + 1  # on until an optimizer counts
        for _ in range(3):
            model(torch.randn(2, 4)).sum().backward()
            opt.step()
        assert (len(mod._global_forward_pre_hooks), len(mod._global_forward_hooks)) == before
        assert seen == ["optimizer"] * 3
    finally:
        d.remove()


def test_an_inference_loop_is_stepped_by_its_outermost_forward():
    seen: list[str] = []
    d = Detector(seen.append, None, "/nowhere")
    d.install()
    try:
        model = _model()
        with torch.no_grad():
            for _ in range(2):
                model(torch.randn(2, 4))
        assert seen == ["forward", "forward"]  # the outer Sequential, not its three children
    finally:
        d.remove()
    assert not d.forward_handles


def _inside_torch_optimizer_step() -> bool:
    """Whether the caller runs inside torch's ``Optimizer.step`` wrapper (its profiler range)."""
    f: types.FrameType | None = sys._getframe(1)
    while f is not None:
        if f.f_code.co_filename.endswith(os.path.join("torch", "optim", "optimizer.py")):
            return True
        f = f.f_back
    return False


@pytest.mark.parametrize("built", ["before the first step", "after the first step"])
def test_a_step_with_an_lr_scheduler_ends_where_the_optimizers_step_returns(built: str):
    """An LR scheduler replaces ``opt.step`` on the instance: the step still ends
    outside torch's ``Optimizer.step#…`` range, and the scheduler still sees its calls."""
    seen: list[bool] = []
    d = Detector(lambda _name: seen.append(_inside_torch_optimizer_step()), None, "/nowhere")
    d.install()
    try:
        model = _model()
        opt = torch.optim.SGD(model.parameters(), lr=1.0)
        sched = None
        if built == "before the first step":
            sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # "lr_scheduler.step() before optimizer.step()" would raise
            for _ in range(4):
                model(torch.randn(2, 4)).sum().backward()
                opt.step()
                if sched is None:
                    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
                else:
                    sched.step()
        # the first step's boundary is the post-hook's (never profiled); the rest the wrapper's
        assert seen == [True, False, False, False]
        assert opt.param_groups[0]["lr"] == 0.5 ** (3 if built == "after the first step" else 4)
    finally:
        d.remove()


class _DictOut(torch.nn.Module):
    """A model that returns a dict, as a Hugging Face model's ``ModelOutput`` is."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = _model()

    def forward(self, x: torch.Tensor) -> dict:
        logits = self.inner(x)
        return {"loss": logits.sum(), "logits": logits}


def test_a_dict_output_is_judged_by_its_first_tensor():
    """A training forward that returns a dict (its loss needs grad) ends no step; an
    evaluation forward of the same model (no grad) does."""
    seen: list[str] = []
    d = Detector(seen.append, None, "/nowhere")
    d.install()
    try:
        model = _DictOut()
        model(torch.randn(2, 4))["loss"].backward()
        assert seen == []  # a training forward: the optimizer that follows will end the step
        d.training_forward = False
        with torch.no_grad():
            model(torch.randn(2, 4))
        assert seen == ["forward"]
    finally:
        d.remove()

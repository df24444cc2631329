"""``harness/script/detect.py``: the global module hooks that find an inference
loop's steps leave once an optimizer counts (each global hook puts every module
call on torch's slow path: 1.27× a 25-module forward, measured), and the
optimizer's steps are counted once each."""

from __future__ import annotations

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

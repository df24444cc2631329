"""An optimizer built before the harness moved the model to the xla device holds
the old (CPU) parameters: its step would update nothing, silently. The xla
backend warns (the README asks for the optimizer inside ``inputs=``, after
``model.to(device)``)."""

from __future__ import annotations

import torch

from trainium_lens.harness.xla.backend import stale_optimizers


def test_an_optimizer_left_on_the_host_is_named_and_one_on_the_device_is_not():
    model = torch.nn.Linear(4, 4)
    opt = torch.optim.AdamW(model.parameters())
    [warning] = stale_optimizers([model, {"optimizers": {"adamw": opt}}, torch.ones(2)], "xla:0")
    assert warning.startswith("AdamW holds parameters on cpu, not on xla:0") and "updates nothing" in warning
    assert stale_optimizers([model, (opt, opt)], "xla:0") == [warning]  # once per optimizer
    assert stale_optimizers([model, torch.ones(2)], "xla:0") == []

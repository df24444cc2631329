"""inputs(device) gets the backend's device; nested structures reach it."""

from dataclasses import dataclass

import torch


@dataclass
class Batch:
    x: torch.Tensor
    extra: dict


SEEN = {}


def make(device):
    SEEN["device"] = device
    model = torch.nn.BatchNorm1d(8)  # parameters and buffers
    return model, Batch(x=torch.randn(4, 8), extra={"scales": [torch.ones(8), torch.ones(8) * 2]})


# trainium: profile inputs=make
@torch.no_grad()
def step(model, batch):
    assert isinstance(SEEN["device"], torch.device)
    want = SEEN["device"].type
    tensors = [batch.x, *batch.extra["scales"], *model.parameters(), *model.buffers()]
    assert all(t.device.type == want for t in tensors), [t.device for t in tensors]
    return model(batch.x) * batch.extra["scales"][1]

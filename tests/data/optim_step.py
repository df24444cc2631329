"""A plain training step: an MLP and an AdamW built without ``fused=`` (the
optimizer finding measures the alternatives; its fix is the editor e2e's)."""

import torch
from torch import nn


def make_training():
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Linear(64, 64) for _ in range(8)])
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    return model, optimizer, torch.randn(16, 64)


# trainium: profile inputs=make_training
def train_step(model, optimizer, x):
    loss = model(x).square().mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return [p.detach() for p in model.parameters()]  # the updated weights: compared by the fix

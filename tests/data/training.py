"""Training steps for the backward-attribution tests (tests/integration/harness/test_training.py)."""

import threading

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint


def make_training():
    torch.manual_seed(0)
    model = nn.ModuleDict({
        "a": nn.Linear(32, 32), "b": nn.Linear(32, 32),
        "loop": nn.ModuleList([nn.Linear(32, 32) for _ in range(3)]),
        "head": nn.Linear(32, 1),
    })
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    return model, opt, torch.randn(16, 32)


def layer(x, lin):
    return torch.tanh(lin(x))


def forward(model, x):
    h = layer(x, model["a"])
    h = layer(h, model["b"])
    for lin in model["loop"]:
        h = layer(h, lin)
    return model["head"](h).pow(2).mean()


# trainium: profile inputs=make_training
def step_main(model, opt, x):
    loss = forward(model, x)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss.detach()


# trainium: profile inputs=make_training
def step_thread(model, opt, x):
    loss = forward(model, x)
    opt.zero_grad()
    worker = threading.Thread(target=loss.backward)  # what the engine does for device tensors
    worker.start()
    worker.join()
    opt.step()
    return loss.detach()


def block(h, model):
    h = torch.tanh(model["a"](h))
    return torch.tanh(model["b"](h))


# trainium: profile inputs=make_training
def step_checkpoint(model, opt, x):
    h = checkpoint(block, x, model, use_reentrant=False)
    loss = model["head"](h).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss.detach()


# trainium: profile inputs=make_training
def step_no_grad(model, opt, x):
    with torch.no_grad():
        return forward(model, x)

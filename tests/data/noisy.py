"""Fixture for the noise tests: a steady workload of several milliseconds per
call, longer than a scheduler time slice (the tests run it on one CPU with
one intra-op thread)."""

import torch


def make_inputs():
    torch.manual_seed(0)
    return (torch.randn(128, 128) / 12,)


# trainium: profile inputs=make_inputs
def steady(x):
    y = x
    for _ in range(60):
        y = torch.tanh(y @ x)  # TANH-LINE
    return y

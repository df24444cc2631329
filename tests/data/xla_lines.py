"""Fixture for the xla backend (tests/integration/harness/test_xla_backend.py): a helper called from
two lines, and a linear layer. Matmuls, because XLA does not fuse a dot with its
neighbours: each call stays one instruction with its own stack."""

import torch

_layer = torch.nn.Linear(64, 64)


def project(x, w):
    return x @ w  # HELPER-DOT


# trainium: profile inputs=make_inputs
def two_calls(x, w):
    a = project(x, w)  # CALL-1
    b = project(torch.relu(a), w)  # CALL-2
    return a + b  # ADD


# trainium: profile inputs=make_inputs
def through_linear(x, w):
    layer = _layer.to(x.device)  # moves the weights on the first call only
    return layer(x)  # LINEAR-CALL


# trainium: profile inputs=make_inputs
def new_graph_each_step(x, w):
    global _calls
    _calls += 1
    return x[:, : 1 + _calls % 60] * 2.0  # SHAPE-CHANGES


_calls = 0


# trainium: profile inputs=make_inputs
def keep_positive(x, w):
    y = (x @ w) - 0.05 * (_step() % 50)  # how many stay positive changes every call
    kept = y[y > 0]  # BOOLEAN-MASK
    return kept.sum()


def _step():
    global _calls
    _calls += 1
    return _calls


def make_inputs():
    return torch.randn(64, 64), torch.randn(64, 64)

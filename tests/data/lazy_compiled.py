"""torch.compile called inside the marked function, on its first call: dynamo is
imported then, not when the file loads (tests/integration/harness/test_compiled.py)."""

import torch

_compiled = None


def make_inputs():
    return (torch.randn(4, 512),)


def body(x):
    y = x * x  # SQUARE
    m = y.mean(-1, keepdim=True)  # MEAN
    return x * torch.rsqrt(m + 1e-6)  # SCALE


# trainium: profile inputs=make_inputs
def lazily_compiled(x):
    global _compiled
    if _compiled is None:
        _compiled = torch.compile(body, fullgraph=True, backend="eager")
    return _compiled(x)  # CALL

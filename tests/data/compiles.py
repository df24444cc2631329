"""Fixture: compiles inside measured steps and a graph break (backend "eager":
dynamo only, no inductor, so it stays fast)."""

import torch

torch._dynamo.config.cache_size_limit = 64  # let every new shape recompile
torch._dynamo.config.automatic_dynamic_shapes = False

_step = {"n": 0}


@torch.compile(backend="eager", dynamic=False)
def _scaled(x):
    return x * 2.0 + 1.0


# trainium: profile
def grows():
    _step["n"] += 1
    x = torch.ones(_step["n"])  # a new shape on every call: a recompile each time
    return _scaled(x)  # GROWS-CALL


@torch.compile(backend="eager")
def _broken(x):
    y = x * 2.0
    print("graph break here")  # dynamo splits the graph at print
    return y + 1.0


def make_inputs():
    return (torch.ones(8),)


# trainium: profile inputs=make_inputs
def breaks(x):
    return _broken(x)  # BREAKS-CALL

"""RMSNorm three ways: the Trainium profiling tutorial, one marker per variant.
Profile every variant and compare them:  trainium-lens profile examples/rmsnorm.py
"""

import functools
import importlib.util

import torch

EPS = 1e-6


def make_inputs():
    """Shared by all three variants: 4×512 bfloat16 activations, a weight, eps."""
    x = torch.randn(4, 512, dtype=torch.bfloat16)
    weight = torch.randn(512, dtype=torch.bfloat16)
    return x, weight, EPS


# trainium: profile inputs=make_inputs
def rms_norm_naive(x, weight, eps):
    x2 = x * x
    mean = x2.mean(-1, keepdim=True)
    rstd = torch.rsqrt(mean + eps)
    return x * rstd * weight


# trainium: profile inputs=make_inputs
def rms_norm_fused(x, weight, eps):
    return torch.rms_norm(x, (x.shape[-1],), weight, eps)


# On Trainium the graph goes to the Neuron compiler; elsewhere to inductor.
_BACKEND = "neuron" if importlib.util.find_spec("torch_neuronx") else "inductor"


@functools.cache
def _compiled_naive():
    """Made on first use: importing this file (to run the other variants) loads no compiler."""
    return torch.compile(rms_norm_naive, fullgraph=True, backend=_BACKEND)


# trainium: profile inputs=make_inputs
def rms_norm_compiled(x, weight, eps):
    return _compiled_naive()(x, weight, eps)


if __name__ == "__main__":
    x, weight, eps = make_inputs()
    print("naive", rms_norm_naive(x, weight, eps)[0, :4])
    print("fused", rms_norm_fused(x, weight, eps)[0, :4])

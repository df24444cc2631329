"""An inference loop on torch-xla with neither optimizer nor ``nn.Module``: two graphs per
batch (the layers, then a summary of their output), each cut by ``xm.mark_step()``. Only
torch-xla's own execution log tells its step (``harness/xla/debug_log.py``)."""

import time

import torch
import torch_xla
import torch_xla.core.xla_model as xm

device = torch_xla.device()
g = torch.Generator().manual_seed(0)
w1 = torch.randn(256, 512, generator=g).to(device)
w2 = torch.randn(512, 256, generator=g).to(device)
t0 = time.perf_counter()
for i in range(14):
    x = torch.randn(64, 256, generator=g).to(device)
    y = torch.relu(x @ w1) @ w2
    xm.mark_step()
    score = (y * y).mean()
    xm.mark_step()
    t1 = time.perf_counter()
    print(f"batch {i}: {score.item():.3f}, {(t1 - t0) * 1e3:.2f} ms", flush=True)
    t0 = t1

"""A small torch-xla training loop (torch-xla's documented shape: model and batch on
``torch_xla.device()``, ``torch_xla.sync()`` after the optimizer's step), run without
``--backend xla`` by tests/integration/cli/test_run_xla.py."""

import torch
import torch_xla

device = torch_xla.device()
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(16, 32).to(device), torch.randn(16, 8).to(device)
for step in range(8):
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
    print(f"step {step} loss {loss.item():.4f}")

"""A plain training loop with an LR scheduler (the scheduler replaces the
optimizer's ``step`` on the instance when it is built)."""

import argparse

import torch

from tinylm.model import TinyNet


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=14)
    args = p.parse_args()
    torch.manual_seed(0)
    model = TinyNet()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=4, gamma=0.5)
    loss_fn = torch.nn.CrossEntropyLoss()
    x, y = torch.randn(32, 64), torch.randint(0, 10, (32,))
    for step in range(1, args.steps + 1):
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        scheduler.step()
        print(f"step {step} loss {loss.item():.4f} lr {scheduler.get_last_lr()[0]:.6f}", flush=True)


if __name__ == "__main__":
    main()

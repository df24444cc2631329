"""An accelerate training loop with gradient accumulation: ``optimizer.step()``
and ``zero_grad()`` are called on every micro-batch and do nothing until the
gradients sync (``with accelerator.accumulate(model):``)."""

import argparse

import torch
from accelerate import Accelerator
from torch.utils.data import DataLoader, TensorDataset


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--updates", type=int, default=12)
    p.add_argument("--accumulate", type=int, default=2)
    args = p.parse_args()
    torch.manual_seed(0)
    accelerator = Accelerator(gradient_accumulation_steps=args.accumulate, cpu=True)
    n = 16 * args.accumulate * args.updates * accelerator.num_processes
    data = TensorDataset(torch.randn(n, 32), torch.randint(0, 4, (n,)))
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.LinearLR(optimizer, total_iters=args.updates)
    loader = DataLoader(data, batch_size=16)
    model, optimizer, loader, scheduler = accelerator.prepare(model, optimizer, loader, scheduler)
    updates = 0
    for x, y in loader:
        with accelerator.accumulate(model):
            loss = torch.nn.functional.cross_entropy(model(x), y)
            accelerator.backward(loss)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
        if accelerator.sync_gradients:
            updates += 1
    accelerator.print(f"{updates} updates on {accelerator.num_processes} processes")
    accelerator.end_training()


if __name__ == "__main__":
    main()

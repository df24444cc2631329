"""A PyTorch Lightning script (automatic optimization, AdamW): Lightning calls
``optimizer.step(closure)`` and the forward and backward run inside it. Its own
step timer (a Callback, from one update's last batch end to the next) prints each
step's time. ``--accumulate k``: ``accumulate_grad_batches=k``, k micro-batches per
update (the first k−1 run their forward and backward outside ``optimizer.step``).
``--profiler pytorch``: Lightning's own torch.profiler (``PyTorchProfiler``)."""

import argparse
import statistics
import time

import lightning as L
import torch
from torch.utils.data import DataLoader, TensorDataset

from tinylm.model import TinyNet


class Module(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = TinyNet()

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.cross_entropy(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=1e-3)


class BatchTimer(L.Callback):
    def __init__(self):
        self.last = None
        self.times = []
        self.updates = 0

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        if trainer.global_step == self.updates:
            return  # a micro-batch that did not update
        self.updates = trainer.global_step
        now = time.perf_counter()
        if self.last is not None:
            self.times.append((now - self.last) * 1e3)
            print(f"step {trainer.global_step} {self.times[-1]:.2f} ms", flush=True)
        self.last = now


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=14)
    p.add_argument("--accumulate", type=int, default=1)
    p.add_argument("--profiler", default=None, help="Lightning's own profiler: simple, pytorch")
    args = p.parse_args()
    torch.manual_seed(0)
    n = 32 * args.steps * args.accumulate
    data = TensorDataset(torch.randn(n, 64), torch.randint(0, 10, (n,)))
    timer = BatchTimer()
    trainer = L.Trainer(
        max_steps=args.steps,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[timer],
        accumulate_grad_batches=args.accumulate,
        profiler=args.profiler,
    )
    trainer.fit(Module(), DataLoader(data, batch_size=32))
    print(f"trained {trainer.global_step} steps; median step {statistics.median(timer.times[2:]):.2f} ms")


if __name__ == "__main__":
    main()

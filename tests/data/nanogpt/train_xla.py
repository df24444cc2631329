"""nanoGPT's training loop (karpathy/nanoGPT train.py, as train.py here) on a
torch-xla device, the way torch-xla's documentation writes a training loop: the
model and batches moved to ``torch_xla.device()``, ``torch_xla.sync()`` after the
optimizer's step (where the step's graph is cut and runs). Unmodified for
`trainium-lens run --backend xla -- python train_xla.py` (tests/integration/cli/test_run_xla.py)."""

import argparse
import time

import torch
import torch_xla
from model import GPT, GPTConfig

p = argparse.ArgumentParser()
p.add_argument("--max-iters", type=int, default=12)
p.add_argument("--batch-size", type=int, default=4)
p.add_argument("--block-size", type=int, default=64)
p.add_argument("--grad-accum", type=int, default=1)
# how a step ends, each as torch-xla's docs write it: torch_xla.sync() after the optimizer's
# step; the loop body inside `with torch_xla.step():`; xm.optimizer_step + xm.mark_step();
# the loss read in an xm.add_step_closure; NxD's: batches from a MpDeviceLoader (a sync at each
# batch), xm.mark_step() before the optimizer steps (its graph runs at the loader's next batch)
p.add_argument("--loop", choices=["sync", "step", "mark_step", "closure", "nxd"], default="sync")
args = p.parse_args()

device = torch_xla.device()
torch.manual_seed(1337)
data = torch.randint(0, 256, (20000,))


def get_batch():
    ix = torch.randint(len(data) - args.block_size, (args.batch_size,))
    x = torch.stack([data[i : i + args.block_size] for i in ix])
    y = torch.stack([data[i + 1 : i + 1 + args.block_size] for i in ix])
    return x.to(device), y.to(device)


model = GPT(
    GPTConfig(block_size=args.block_size, vocab_size=256, n_layer=2, n_head=4, n_embd=128, dropout=0.0)
)
model.to(device)
optimizer = model.configure_optimizers(0.1, 6e-4, (0.9, 0.95), "cpu")
X, Y = get_batch()


class StandInNxDOptimizer(torch.optim.Optimizer):
    """A stand-in for NxD's ``NxDOptimizer``: an ``Optimizer`` subclass that wraps the
    inner one and never runs ``Optimizer.__init__`` (so torch's step hooks are the inner one's)."""

    def __init__(self, inner):
        self.inner = inner

    @property
    def param_groups(self):
        return self.inner.param_groups

    def step(self, closure=None):
        return self.inner.step(closure)

    def zero_grad(self, set_to_none=True):
        self.inner.zero_grad(set_to_none=set_to_none)


def nxd_batches():
    """Synthetic token batches from a CPU DataLoader, moved by a MpDeviceLoader (NxD's)."""
    from torch.utils.data import DataLoader, TensorDataset
    from torch_xla.distributed.parallel_loader import MpDeviceLoader

    n = args.max_iters * args.grad_accum * args.batch_size
    ix = torch.randint(len(data) - args.block_size, (n,))
    x = torch.stack([data[i : i + args.block_size] for i in ix])
    y = torch.stack([data[i + 1 : i + 1 + args.block_size] for i in ix])
    loader = DataLoader(TensorDataset(x, y), batch_size=args.batch_size)
    return MpDeviceLoader(loader, device)


def nxd_loop():
    """NxD's loop: one optimizer update per ``grad_accum`` batches, each batch a graph of its
    own (the loader syncs), and ``xm.mark_step()`` before the optimizer's step."""
    wrapped = StandInNxDOptimizer(optimizer)
    for step, (x, y) in enumerate(nxd_batches()):
        logits, loss = model(x, y)
        loss = loss / args.grad_accum
        loss.backward()
        if (step + 1) % args.grad_accum == 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            xm.mark_step()
            wrapped.step()
            wrapped.zero_grad(set_to_none=True)
            report(step // args.grad_accum, loss)


def train_step():
    global X, Y
    for _micro_step in range(args.grad_accum):
        logits, loss = model(X, Y)
        loss = loss / args.grad_accum
        X, Y = get_batch()
        loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    if args.loop == "mark_step":
        xm.optimizer_step(optimizer)
    else:
        optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss


def report(iter_num, loss):
    global t0
    lossf = loss.item() * args.grad_accum
    t1 = time.time()
    print(f"iter {iter_num}: loss {lossf:.4f}, time {(t1 - t0) * 1000:.2f}ms")
    t0 = t1


if args.loop != "sync":
    import torch_xla.core.xla_model as xm
t0 = time.time()
if args.loop == "nxd":
    nxd_loop()
for iter_num in range(0 if args.loop == "nxd" else args.max_iters):
    if args.loop == "step":
        with torch_xla.step():
            loss = train_step()
        report(iter_num, loss)
    elif args.loop == "closure":
        loss = train_step()
        xm.add_step_closure(report, args=(iter_num, loss))
        xm.mark_step()
    else:
        loss = train_step()
        if args.loop == "mark_step":
            xm.mark_step()
        else:
            torch_xla.sync()
        report(iter_num, loss)

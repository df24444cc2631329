"""A plain training script: nothing in it knows about any profiler."""

import argparse
import os
import signal
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

from model import TinyNet


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--log-every", type=int, default=1)
    p.add_argument("--fail-at", type=int, default=0, help="raise at this step (for testing crash handling)")
    p.add_argument(
        "--abort-at-exit",
        type=int,
        default=-1,
        metavar="RANK",
        help="this rank aborts as Python shuts down, after its script ended (as torch's gloo threads may)",
    )
    return p.parse_args()


class AbortAtExit:
    """Freed with the module's globals, after every atexit handler: SIGABRT then."""

    def __del__(self):
        time.sleep(1)  # the other ranks end first, as they do when gloo's threads abort one
        os.kill(os.getpid(), signal.SIGABRT)


def main():
    args = parse_args()
    torch.manual_seed(0)
    # one batch per step, up to 64 batches; a longer run goes over them again
    batches = min(args.steps, 64)
    data = TensorDataset(torch.randn(batches * args.batch_size, 64), torch.randint(0, 10, (batches * args.batch_size,)))
    distributed = "WORLD_SIZE" in os.environ
    if distributed:
        dist.init_process_group("gloo")
        sampler = DistributedSampler(data, shuffle=True, seed=0)
        loader = DataLoader(data, batch_size=args.batch_size, sampler=sampler)
    else:
        loader = DataLoader(data, batch_size=args.batch_size, shuffle=True)
    model = TinyNet()
    if distributed:
        model = DistributedDataParallel(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    loss_fn = torch.nn.CrossEntropyLoss()
    step = 0
    for epoch in range(-(-args.steps // batches)):
        if distributed:
            sampler.set_epoch(epoch)
        for x, y in loader:
            optimizer.zero_grad()
            logits = model(x)
            loss = loss_fn(logits, y)
            loss.backward()
            optimizer.step()
            step += 1
            if args.fail_at and step == args.fail_at:
                raise RuntimeError(f"diverged at step {step}")
            if step % args.log_every == 0 and (not distributed or dist.get_rank() == 0):
                print(f"step {step} loss {loss.item():.4f}", flush=True)
    if distributed:
        dist.destroy_process_group()
    print("done", file=sys.stderr)
    if args.abort_at_exit >= 0 and args.abort_at_exit == int(os.environ.get("RANK", "0")):
        global _ABORT
        _ABORT = AbortAtExit()


if __name__ == "__main__":
    main()

"""A data-parallel training step (DDP) on two ranks:

    trainium-lens profile examples/ddp_step.py            # nproc=2 from the marker
    trainium-lens profile examples/ddp_step.py --nproc 4  # or any number of ranks

Each rank runs forward and backward on its shard of the batch; DDP all-reduces
the gradients during backward. Rank 1's shard is three times rank 0's, so the
result names rank 1 the straggler, on the backward line."""

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def make(rank, world_size):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 256))
    ddp = DDP(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    torch.manual_seed(rank)
    batch = 64 if rank == 0 else 192  # an uneven shard: rank 1 is the straggler
    return ddp, opt, torch.randn(batch, 256), torch.randn(batch, 256)


# trainium: profile inputs=make nproc=2 wait=0 warmup=1 active=3 timing_calls=3
def train_step(ddp, opt, x, y):
    opt.zero_grad()
    loss = nn.functional.mse_loss(ddp(x), y)
    loss.backward()
    opt.step()
    dist.barrier()
    return loss

"""Profile the model's forward pass, a training step, and a trainer's step."""

from dataclasses import dataclass

import torch

from .model import GPT, GPTConfig

CONFIG = GPTConfig()


@dataclass
class Batch:
    idx: torch.Tensor
    targets: torch.Tensor


def make_batch(config):
    idx = torch.randint(0, config.vocab_size, (4, config.block_size))
    return Batch(idx=idx, targets=torch.roll(idx, -1, dims=1))


def forward_inputs():
    model = GPT(CONFIG).eval()
    return {"model": model, "batch": make_batch(CONFIG)}


# trainium: profile inputs=forward_inputs
@torch.no_grad()
def forward(model, batch):
    return model(batch.idx)


def train_inputs(device):
    model = GPT(CONFIG).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    return model, optimizer, make_batch(CONFIG)


# trainium: profile inputs=train_inputs
def train_step(model, optimizer, batch):
    loss = model(batch.idx, batch.targets)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss.detach()


class Trainer:
    def __init__(self, device):
        self.model = GPT(CONFIG).to(device)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=1e-2)

    # trainium: profile inputs=trainer_inputs
    def step(self, batch):
        loss = self.model(batch.idx, batch.targets)
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return loss.detach()


def trainer_inputs(device):
    return Trainer(device), make_batch(CONFIG)


if __name__ == "__main__":
    raise SystemExit("the harness must not run this block")

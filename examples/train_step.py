"""A training step two ways: where do the forward, backward and optimizer go?

A small transformer block written op by op (RMSNorm, attention, MLP), a loss
and AdamW. Each line of a step shows its forward and the backward it causes:

    trainium-lens profile examples/train_step.py

``train_step_naive`` writes RMSNorm and attention out in elementwise ops and
steps a per-parameter AdamW (``foreach=False``: one small op per parameter per
update term); ``train_step_fused`` uses ``torch.rms_norm``,
``F.scaled_dot_product_attention`` and ``foreach=True``. Both share one
``inputs=`` function: the model, its two optimizers and the batch. The state
carries over between steps (the parameters change), so the two variants'
losses differ by the training the first one did.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn

DIM, HEADS, SEQ, BATCH = 64, 4, 32, 4


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1 = nn.Parameter(torch.ones(DIM))
        self.qkv = nn.Linear(DIM, 3 * DIM)
        self.proj = nn.Linear(DIM, DIM)
        self.norm2 = nn.Parameter(torch.ones(DIM))
        self.fc = nn.Linear(DIM, 4 * DIM)
        self.out = nn.Linear(4 * DIM, DIM)
        self.head = nn.Linear(DIM, DIM)


def make_training():
    """The model (on CPU: the harness moves it), an optimizer per variant, a batch."""
    model = Block()
    optimizers = {
        "loop": torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=False),
        "foreach": torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True),
    }
    x = torch.randn(BATCH, SEQ, DIM)
    target = torch.randn(BATCH, SEQ, DIM)
    return model, optimizers, (x, target)


def rms_norm(x, weight, eps=1e-6):
    rstd = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return x * rstd * weight


def split_heads(t):
    return t.view(BATCH, SEQ, HEADS, DIM // HEADS).transpose(1, 2)


# trainium: profile inputs=make_training
def train_step_naive(model, optimizers, batch):
    x, target = batch
    h = rms_norm(x, model.norm1)
    q, k, v = model.qkv(h).chunk(3, dim=-1)
    q, k, v = split_heads(q), split_heads(k), split_heads(v)
    scores = q @ k.transpose(-2, -1) / math.sqrt(DIM // HEADS)
    attn = torch.softmax(scores, dim=-1) @ v
    x = x + model.proj(attn.transpose(1, 2).reshape(BATCH, SEQ, DIM))
    h = rms_norm(x, model.norm2)
    x = x + model.out(F.gelu(model.fc(h)))
    loss = F.mse_loss(model.head(x), target)
    optimizer = optimizers["loop"]
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.detach()


# trainium: profile inputs=make_training
def train_step_fused(model, optimizers, batch):
    x, target = batch
    h = torch.rms_norm(x, (DIM,), model.norm1, 1e-6)
    q, k, v = model.qkv(h).chunk(3, dim=-1)
    q, k, v = split_heads(q), split_heads(k), split_heads(v)
    attn = F.scaled_dot_product_attention(q, k, v)
    x = x + model.proj(attn.transpose(1, 2).reshape(BATCH, SEQ, DIM))
    h = torch.rms_norm(x, (DIM,), model.norm2, 1e-6)
    x = x + model.out(F.gelu(model.fc(h)))
    loss = F.mse_loss(model.head(x), target)
    optimizer = optimizers["foreach"]
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.detach()


if __name__ == "__main__":
    model, optimizers, batch = make_training()
    for _ in range(3):
        print(
            "naive",
            float(train_step_naive(model, optimizers, batch)),
            "fused",
            float(train_step_fused(model, optimizers, batch)),
        )

"""Advice checked on real code: GPT-2's op-by-op tanh GELU (and the fix), and
a per-parameter AdamW whose alternatives the harness measures."""

import torch
from torch import nn


def _gpt2(activation, device):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(n_layer=2, n_head=4, n_embd=64, vocab_size=256, n_positions=64,
                        activation_function=activation)
    model = GPT2LMHeadModel(config).eval()  # random weights: nothing is downloaded
    return model, torch.randint(0, 256, (2, 32), device=device)


def make_gpt2(device):
    return _gpt2("gelu_new", device)  # NewGELUActivation: the tanh GELU op by op


def make_gpt2_fused(device):
    return _gpt2("gelu_pytorch_tanh", device)  # F.gelu(approximate="tanh")


# trainium: profile inputs=make_gpt2 compare=gpt2
@torch.no_grad()
def gpt2_forward(model, ids):
    return model(input_ids=ids).logits


# trainium: profile inputs=make_gpt2_fused compare=gpt2
@torch.no_grad()
def gpt2_forward_fused(model, ids):
    return model(input_ids=ids).logits


def make_training():
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Linear(64, 64) for _ in range(8)])
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=False)
    return model, optimizer, torch.randn(16, 64)


# trainium: profile inputs=make_training
def train_step(model, optimizer, x):
    loss = model(x).square().mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.detach()

"""How a user profiles karpathy's nanoGPT (model.py beside this file, as published)
with Trainium Lens: a small config, the forward and one AdamW training step."""

import torch

from model import GPT, GPTConfig

CONFIG = GPTConfig(block_size=64, vocab_size=512, n_layer=2, n_head=4, n_embd=64, dropout=0.0, bias=True)
BATCH = 4


def make_batch(device):
    torch.manual_seed(0)
    model = GPT(CONFIG).to(device)  # before the optimizer: it must hold the device's parameters
    optimizer = model.configure_optimizers(0.1, 6e-4, (0.9, 0.95), device.type)
    idx = torch.randint(0, CONFIG.vocab_size, (BATCH, CONFIG.block_size))
    targets = torch.randint(0, CONFIG.vocab_size, (BATCH, CONFIG.block_size))
    return model, optimizer, idx.to(device), targets.to(device)


# trainium: profile inputs=make_batch
def forward(model, optimizer, idx, targets):
    logits, loss = model(idx, targets)
    return loss


# trainium: profile inputs=make_batch
def train_step(model, optimizer, idx, targets):
    logits, loss = model(idx, targets)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    return loss.detach()


# trainium: profile inputs=make_batch
def train_step_logged(model, optimizer, idx, targets):
    logits, loss = model(idx, targets)
    print(f"loss {loss.item():.4f}")  # LOSS-ITEM
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    return loss.detach()

"""nanoGPT's training loop (karpathy/nanoGPT train.py: its get_batch, gradient
accumulation, grad clipping, configure_optimizers), cut to a tiny config and
random tokens (no dataset download), driving the vendored model.py unmodified."""

import argparse
import time

import torch

from model import GPT, GPTConfig

p = argparse.ArgumentParser()
p.add_argument("--max-iters", type=int, default=12)
p.add_argument("--batch-size", type=int, default=4)
p.add_argument("--block-size", type=int, default=64)
p.add_argument("--grad-accum", type=int, default=2)
args = p.parse_args()

torch.manual_seed(1337)
data = torch.randint(0, 256, (20000,))


def get_batch():
    ix = torch.randint(len(data) - args.block_size, (args.batch_size,))
    x = torch.stack([data[i : i + args.block_size] for i in ix])
    y = torch.stack([data[i + 1 : i + 1 + args.block_size] for i in ix])
    return x, y


model = GPT(GPTConfig(block_size=args.block_size, vocab_size=256, n_layer=2, n_head=4, n_embd=128, dropout=0.0))
optimizer = model.configure_optimizers(0.1, 6e-4, (0.9, 0.95), "cpu")
X, Y = get_batch()
t0 = time.time()
for iter_num in range(args.max_iters):
    for micro_step in range(args.grad_accum):
        logits, loss = model(X, Y)
        loss = loss / args.grad_accum
        X, Y = get_batch()
        loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    t1 = time.time()
    print(f"iter {iter_num}: loss {loss.item() * args.grad_accum:.4f}, time {(t1 - t0) * 1000:.2f}ms")
    t0 = t1

"""A small GPT whose model is torch.compile'd, trained a step at a time
(tests/integration/harness/test_compiled_training.py): AOTAutograd's compiled
backward must land on the line that called the compiled model.

Any recompile is an error here: the labelled twin steps must not disturb
dynamo's guards for the plain ones."""

import math

import torch
import torch.nn.functional as F
from torch import nn

torch._dynamo.config.error_on_recompile = True

VOCAB, CONTEXT, WIDTH, HEADS = 128, 32, 64, 4


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(WIDTH), nn.LayerNorm(WIDTH)
        self.qkv, self.proj = nn.Linear(WIDTH, 3 * WIDTH), nn.Linear(WIDTH, WIDTH)
        self.fc, self.out = nn.Linear(WIDTH, 4 * WIDTH), nn.Linear(4 * WIDTH, WIDTH)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, HEADS, c // HEADS).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(c // HEADS)  # ATTENTION-LINE
        att = att.masked_fill(torch.ones(t, t, dtype=torch.bool).tril().logical_not(), float("-inf"))
        y = (att.softmax(-1) @ v).transpose(1, 2).reshape(b, t, c)
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.ln2(x))))  # MLP-LINE


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok, self.pos = nn.Embedding(VOCAB, WIDTH), nn.Embedding(CONTEXT, WIDTH)
        self.blocks = nn.ModuleList([Block()])  # one: each kernel inductor makes is a g++ run
        self.ln = nn.LayerNorm(WIDTH)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
        for block in self.blocks:
            x = block(x)
        return self.ln(x) @ self.tok.weight.T


def make_training():
    torch.manual_seed(0)
    model = GPT()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, foreach=True)
    return torch.compile(model), opt, torch.randint(0, VOCAB, (2, CONTEXT))


# trainium: profile inputs=make_training
def train_step(model, opt, idx):
    logits = model(idx)  # FORWARD-LINE
    loss = F.cross_entropy(logits.view(-1, VOCAB), idx.view(-1))
    loss.backward()  # BACKWARD-LINE
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss.detach()

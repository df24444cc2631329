import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, hidden)
        self.down = nn.Linear(hidden, dim)

    def forward(self, x):
        h = self.norm(x)
        h = torch.relu(self.up(h))
        return x + self.down(h)


class TinyNet(nn.Module):
    def __init__(self, features=64, dim=128, hidden=256, depth=2, classes=10):
        super().__init__()
        self.inp = nn.Linear(features, dim)
        self.blocks = nn.ModuleList([Block(dim, hidden) for _ in range(depth)])
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        x = self.inp(x)
        for block in self.blocks:
            x = block(x)
        return self.head(x)

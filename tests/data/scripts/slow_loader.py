"""A training loop whose Dataset does its work in __getitem__ (decoding, say)."""

import time

import torch
from torch.utils.data import DataLoader, Dataset


class Slow(Dataset):
    def __len__(self):
        return 16 * 12

    def __getitem__(self, i):
        time.sleep(0.004)
        return torch.randn(32), i % 4


def main():
    model = torch.nn.Linear(32, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in DataLoader(Slow(), batch_size=16):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    print("trained")


if __name__ == "__main__":
    main()

"""Uses torch, but makes no optimizer step and calls no module."""

import torch

if __name__ == "__main__":
    total = torch.zeros(())
    for i in range(5):
        total += torch.randn(100).sum()
    print("total", float(total))

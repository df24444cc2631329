"""Evaluation only: no optimizer; the model's forward under no_grad is the step."""

import torch

from tinylm.model import TinyNet

if __name__ == "__main__":
    model = TinyNet().eval()
    x = torch.randn(16, 64)
    with torch.no_grad():
        for i in range(10):
            y = model(x)
    print("predicted", int(y.argmax(dim=1)[0]))

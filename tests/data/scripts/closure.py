"""A loop that hands its forward and backward to the optimizer as a closure
(``optimizer.step(closure)``), as Lightning's automatic optimization does."""

import torch

from tinylm.model import TinyNet


def main():
    torch.manual_seed(0)
    model = TinyNet()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss_fn = torch.nn.CrossEntropyLoss()
    x, y = torch.randn(32, 64), torch.randint(0, 10, (32,))

    def closure():
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        return loss

    for step in range(1, 15):
        loss = optimizer.step(closure)
        print(f"step {step} loss {loss.item():.4f}", flush=True)


if __name__ == "__main__":
    main()

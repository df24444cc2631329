"""Already profiles itself with torch.profiler."""

import torch

if __name__ == "__main__":
    model = torch.nn.Linear(8, 8)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with torch.profiler.profile() as prof:
        for i in range(8):
            opt.zero_grad()
            model(torch.randn(4, 8)).sum().backward()
            opt.step()
    print("own profile events", len(prof.events()) > 0)

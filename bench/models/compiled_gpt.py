"""The warm-worker bench's small GPT, torch.compile'd, trained a step at a time:
the compiled forward and AOTAutograd's compiled backward."""

import torch
import torch.nn.functional as F
from tiny_gpt import CONTEXT, VOCAB, TinyGPT


def make_training():
    torch.manual_seed(0)
    model = TinyGPT()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, foreach=True)
    return torch.compile(model), opt, torch.randint(0, VOCAB, (2, CONTEXT))


# trainium: profile inputs=make_training
def compiled_train_step(model, opt, idx):
    logits = model(idx)
    loss = F.cross_entropy(logits.view(-1, VOCAB), idx.view(-1))
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss.detach()

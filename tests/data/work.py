"""Work per line: shapes the tests know (tests/integration/harness/test_work.py)."""

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

M, K, N = 96, 64, 80


def both_grad():
    torch.manual_seed(0)
    return (torch.randn(M, K, requires_grad=True), torch.randn(K, N, requires_grad=True))


def weight_grad():
    torch.manual_seed(0)
    return (torch.randn(M, K), torch.randn(K, N, requires_grad=True))


# trainium: profile inputs=both_grad
def matmul_both(x, w):
    y = x @ w
    y.sum().backward()
    return y.detach()


# trainium: profile inputs=weight_grad
def relu_step(x, w):
    h = torch.relu(x @ w)
    loss = h.sum()
    loss.backward()
    return loss.detach()


# trainium: profile
def allocates():
    big = torch.zeros(1024, 512)
    return big.sum()


def make_net():
    torch.manual_seed(0)
    net = nn.ModuleDict({"conv": nn.Conv2d(3, 8, 3, padding=1), "proj": nn.Linear(16, 48)})
    return net, torch.randn(2, 3, 12, 12), torch.randn(2, 10, 16)


def block(net, t):
    q, k, v = net["proj"](t).view(2, 10, 3, 16).unbind(2)
    a = F.scaled_dot_product_attention(q.unsqueeze(1), k.unsqueeze(1), v.unsqueeze(1))
    return a.sum()


# trainium: profile inputs=make_net
def conv_attention(net, img, t):
    c = net["conv"](img).relu().mean()
    s = checkpoint(block, net, t, use_reentrant=False)
    loss = c + s
    loss.backward()
    return loss.detach()

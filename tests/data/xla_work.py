"""Work per line on torch-xla (tests/integration/harness/test_xla_work.py): shapes the test knows."""

import torch
import torch.nn.functional as F

B, M, K, N = 3, 40, 24, 56


def inputs(device):
    torch.manual_seed(0)
    return (
        torch.randn(M, K, device=device),
        torch.randn(K, N, device=device),
        torch.randn(B, M, K, device=device),
        torch.randn(B, K, N, device=device),
        torch.randn(2, 3, 10, 10, device=device),
        torch.randn(8, 3, 3, 3, device=device),
    )


# trainium: profile inputs=inputs
def shapes(x, w, xb, wb, img, kernel):
    y = x @ w
    yb = torch.bmm(xb, wb)
    c = F.conv2d(img, kernel, padding=1)
    return y.sum() + yb.sum() + c.sum()

"""Fixture: user helpers, loops, recursion, modules and print (see tests/integration/harness/test_lines.py)."""

import os

import torch


def scale(x):
    y = x * 2.0  # HELPER-MUL
    return y + 1.0  # HELPER-ADD


# trainium: profile inputs=make_inputs
def two_calls(x):
    a = scale(x)  # CALL-1
    b = scale(a)  # CALL-2
    return a - b  # SUB


# trainium: profile inputs=make_inputs active=3
def loop(x):
    for _ in range(4):
        x = x + 1.0  # LOOP-ADD
    return x


def depth(x, n):
    if n == 0:
        return torch.neg(x)  # RECURSE-NEG
    return depth(x, n - 1)  # RECURSE-CALL


# trainium: profile inputs=make_inputs
def recursive(x):
    return depth(x, 2)  # RECURSE-TOP


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        return torch.relu(self.lin(x))  # MODULE-FWD


_block = Block()


# trainium: profile inputs=make_inputs
def through_module(x):
    print("hello from user code")
    os.write(1, b"raw write to fd 1\n")  # C-level output: must not reach the event stream
    with torch.no_grad():
        return _block(x)  # MODULE-CALL


def make_inputs():
    return (torch.randn(4, 8),)


if __name__ == "__main__":
    print("MAIN BLOCK RAN")

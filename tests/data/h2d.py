"""Fixture: a CPU scalar tensor promoted into an op on another device."""

import torch


def promote(x):
    scale = torch.tensor(2.0)  # a CPU tensor, made on every call
    y = x * scale  # H2D-LINE
    return y + 1.0  # PLAIN-LINE

"""A GPT-style model in the shape of nanoGPT: LayerNorm, attention and MLP modules."""

from .model import GPT, GPTConfig

__all__ = ["GPT", "GPTConfig"]

"""Trainium Lens: per-source-line device time for PyTorch code.

Kept free of imports on purpose: the harness (``trainium_lens.harness``) is
copied to remote hosts together with this file alone.
"""

__version__ = "0.1.0"

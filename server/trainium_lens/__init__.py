"""Trainium Lens: per-source-line device time for PyTorch code.

Kept free of imports on purpose: the harness (``trainium_lens.harness``) is
copied to remote hosts together with this file alone.
"""

# The one version of the package, the CLI, the server and the extension: pyproject.toml
# reads it; package.json must say the same (tests/unit/test_wiring.py). Raise both together.
__version__ = "0.1.0"

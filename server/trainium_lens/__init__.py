"""Trainium Lens: per-source-line device time for PyTorch code.

Kept free of imports on purpose: the harness (``trainium_lens.harness``) is
copied to remote hosts together with this file alone.
"""

# The one version of the package, the CLI, the server and the extension: pyproject.toml
# reads it; package.json must say the same (tests/unit/test_wiring.py). Raise both together.
__version__ = "0.1.0"


def load_ipython_extension(ipython: object) -> None:
    """``%load_ext trainium_lens``: the notebook magics (trainium_lens/notebook/magic.py).
    Imported by name: every layer imports this package for ``__version__``, and none
    may depend on the notebook, the layer above them all."""
    import importlib

    importlib.import_module("trainium_lens.notebook.magic").load(ipython)

"""Injected first on ``PYTHONPATH`` by ``trainium-lens run``: runs in every Python
that starts under the command, before its ``__main__``. It chains to any other
``sitecustomize`` further down ``sys.path`` (shadowing one would silently drop the
user's), then arms the harness only where ``TRAINIUM_LENS_RUN`` names a spec
(``harness/script/arm.py`` decides which process). Stdlib only; imports no torch."""

import importlib.machinery
import importlib.util
import os
import sys


def _chain() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


_chain()
if os.environ.get("TRAINIUM_LENS_RUN"):
    try:
        from trainium_lens.harness.script import arm

        arm.boot()
    except Exception as _exc:  # never break the user's interpreter
        sys.stderr.write(f"trainium-lens: could not arm the harness: {_exc}\n")

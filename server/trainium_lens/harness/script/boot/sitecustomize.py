"""Injected first on ``PYTHONPATH`` by ``trainium-lens run``: runs in every Python
that starts under the command, before its ``__main__``. It chains to any other
``sitecustomize`` further down ``sys.path`` (shadowing one would silently drop the
user's), then arms the harness only where ``TRAINIUM_LENS_RUN`` names a spec
(``harness/script/arm.py`` decides which process). Stdlib only; imports no torch.

The user's ``sitecustomize`` failing must not stop the arming: its error is
printed as Python's ``site`` prints it ("Error in sitecustomize; ...") and the
interpreter goes on, as it would without us."""

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
    ours = sys.modules.get("sitecustomize")
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    try:
        spec.loader.exec_module(module)
    except Exception as err:  # what site.execsitecustomize does with it
        if ours is not None:
            sys.modules["sitecustomize"] = ours
        if isinstance(err, ImportError) and err.name == "sitecustomize":
            return
        if sys.flags.verbose:
            sys.excepthook(*sys.exc_info())
        else:
            sys.stderr.write(
                f"Error in sitecustomize; set PYTHONVERBOSE for traceback:\n{type(err).__name__}: {err}\n"
            )


_chain()
if os.environ.get("TRAINIUM_LENS_RUN"):
    try:
        from trainium_lens.harness.script import arm

        arm.boot()
    except Exception as _exc:  # never break the user's interpreter
        sys.stderr.write(f"trainium-lens: could not arm the harness: {_exc}\n")

"""A hook that runs code once a module has been imported by the script, without
importing it first: ``arm.py`` installs the step hooks after ``import torch``,
``frameworks.py`` its callbacks after the Trainer's or accelerate's modules load.
Standard library only: it is in place before the script imports anything."""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from typing import Any


class AfterImport(importlib.abc.MetaPathFinder):
    """Runs ``then(module)`` once the module ``name`` has been imported (its first
    import only; the finder then leaves ``sys.meta_path``). What ``then`` raises is
    swallowed: the script's own import never fails because of the tool (each caller
    says in its own way what went unprofiled)."""

    def __init__(self, name: str, then: Any):
        self.name, self.then = name, then
        self.busy = False

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != self.name or self.busy:
            return None
        self.busy = True
        try:
            found = importlib.util.find_spec(name)  # the rest of sys.meta_path, as without us
        finally:
            self.busy = False
        if found is None or found.loader is None:
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        loader, then = found.loader, self.then

        class _Loader(importlib.abc.Loader):
            def create_module(self, spec: Any) -> Any:
                return loader.create_module(spec)

            def exec_module(self, module: Any) -> None:
                loader.exec_module(module)
                try:
                    then(module)
                except Exception:  # never the script's import that fails
                    pass

        found.loader = _Loader()
        return found

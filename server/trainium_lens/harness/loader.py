"""Load the user's file as a module (its ``__main__`` block does not run) and
tell user code from library code (for line labels and error locations)."""

from __future__ import annotations

import importlib.util
import os
import sys
import traceback as tb_module
from types import CodeType, ModuleType, TracebackType
from typing import Any, Callable

from .dist import inputs_kwargs
from .events import HarnessError

_HARNESS_DIR = os.path.dirname(os.path.realpath(__file__))


class UserCode:
    """Which files are the user's: under the workspace root, never a library."""

    def __init__(self, workspace_root: str):
        self.root = os.path.realpath(workspace_root)
        self._files: dict[str, str | None] = {}

    def relpath(self, filename: str) -> str | None:
        """The workspace-relative POSIX path of a user file, else None (cached)."""
        try:
            return self._files[filename]
        except KeyError:
            pass
        rel = None
        if filename and not filename.startswith("<"):
            path = os.path.realpath(filename)
            parts = path.split(os.sep)
            library = ("site-packages" in parts or "dist-packages" in parts
                       or path.startswith(_HARNESS_DIR + os.sep))
            if not library and path.startswith(self.root + os.sep):
                rel = os.path.relpath(path, self.root).replace(os.sep, "/")
                if rel.startswith(".venv/") or "/.venv/" in rel:
                    rel = None
        self._files[filename] = rel
        return rel

    def code_rel(self, code: CodeType) -> str | None:
        return self.relpath(code.co_filename)

    def innermost_frame(self, tb: TracebackType | None) -> tuple[str | None, int | None]:
        """file:line of the deepest traceback entry in user code."""
        found: tuple[str | None, int | None] = (None, None)
        while tb is not None:
            rel = self.relpath(tb.tb_frame.f_code.co_filename)
            if rel is not None:
                found = (rel, tb.tb_lineno)
            tb = tb.tb_next
        return found

    def error_from(self, exc: BaseException, kind: str, what: str) -> HarnessError:
        file, line = self.innermost_frame(exc.__traceback__)
        text = "".join(tb_module.format_exception(type(exc), exc, exc.__traceback__))
        where = f" ({file}:{line})" if file else ""
        message = f"{what} raised {type(exc).__name__}: {exc}{where}"
        return HarnessError(kind, message, file, line, text)


def load_module(path: str, workspace_root: str, rel_file: str) -> ModuleType:
    """Import the file by path under a private module name, so ``if __name__ ==
    "__main__":`` stays false; the workspace root and the file's folder go on
    ``sys.path`` so its own imports work as they do for the user."""
    for entry in (os.path.dirname(path), workspace_root):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    stem = "".join(c if c.isalnum() else "_" for c in os.path.splitext(rel_file)[0])
    name = f"_trainium_lens_user_{stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise HarnessError("spec", f"cannot load {rel_file} as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses, pickling and torch.compile look it up
    spec.loader.exec_module(module)
    return module


def call_inputs(module: ModuleType, name: str, rel_file: str, for_fn: str,
                user: UserCode) -> tuple[tuple, dict]:
    """Run the ``inputs=`` function: a tuple is positional args, a dict keyword args."""
    make = getattr(module, name, None)
    if not callable(make):
        raise HarnessError("inputs", f"inputs={name} (for {for_fn}) names no function in {rel_file}",
                           rel_file, None)
    try:
        value = make(**inputs_kwargs(make))  # rank/world_size when it declares them
    except Exception as exc:  # the user's code: report where it failed
        raise user.error_from(exc, "inputs", f"inputs function {name}()") from None
    if isinstance(value, tuple):
        return value, {}
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise HarnessError("inputs", f"{name}() returned a dict with non-string keys",
                               rel_file, None)
        return (), dict(value)
    raise HarnessError("inputs", f"{name}() must return a tuple (positional arguments) or a "
                       f"dict (keyword arguments), got {type(value).__name__}", rel_file, None)


def required_params(fn: Callable[..., Any]) -> list[str]:
    import inspect

    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return []
    return [p.name for p in sig.parameters.values()
            if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD,
                                                   p.KEYWORD_ONLY)]

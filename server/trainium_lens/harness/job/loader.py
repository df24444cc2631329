"""Load the user's file as a module (its ``__main__`` block does not run) and
tell user code from library code (for line labels and error locations).

A file inside a package (a chain of ``__init__.py`` folders; or, when the file
uses relative imports, a namespace package rooted at the workspace or a
``src/`` folder) is imported by its dotted name with the package root on
``sys.path``, the way ``python -m`` would, so relative imports work. A
top-level script is loaded by path under a private name.

``--include PACKAGE`` makes an installed package's files user code too: their
lines are labelled and their results name them by module path
(``torch/nn/functional.py``), the path below their ``sys.path`` entry.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import traceback as tb_module
from collections.abc import Callable
from types import CodeType, ModuleType, TracebackType
from typing import Any

from trainium_lens.harness.events import HarnessError
from trainium_lens.harness.torchrun.rank import inputs_kwargs

# The harness package (this file is in harness/job/): never user code, even when the
# workspace is the checkout that holds it.
_HARNESS_DIR = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))


class UserCode:
    """Which files are the user's: under the workspace root, never a library;
    plus the files of included packages (``include``: (location, root) pairs,
    see ``resolve_include``)."""

    def __init__(self, workspace_root: str, include: list[tuple[str, str]] | None = None):
        self.root = os.path.realpath(workspace_root)
        self._files: dict[str, str | None] = {}
        self.include = list(include or [])
        self.library_files: dict[str, str] = {}  # module path -> absolute path (included files)
        # A notebook kernel's cells: a file name the kernel compiled a cell under, to the
        # name results give it (eager/in_process.py); their text lives in linecache.
        self.cell_name: Callable[[str], str | None] | None = None
        self.cell_files: dict[str, str] = {}  # name in results -> the kernel's file name

    def _included(self, path: str) -> str | None:
        for location, root in self.include:
            if path == location or path.startswith(location + os.sep):
                rel = os.path.relpath(path, root).replace(os.sep, "/")
                self.library_files[rel] = path
                return rel
        return None

    def abspath(self, rel: str) -> str:
        """Where a result's file lies on this host."""
        found = self.library_files.get(rel) or self.cell_files.get(rel)
        return found or os.path.join(self.root, *rel.split("/"))

    def relpath(self, filename: str) -> str | None:
        """The workspace-relative POSIX path of a user file, else None (cached)."""
        try:
            return self._files[filename]
        except KeyError:
            pass
        rel = None
        cell = self.cell_name(filename) if self.cell_name and filename else None
        if cell is not None:
            self.cell_files[cell] = filename
            self._files[filename] = cell
            return cell
        if filename and not filename.startswith("<"):
            path = os.path.realpath(filename)
            if self.include:
                rel = self._included(path)
                if rel is not None:
                    self._files[filename] = rel
                    return rel
            parts = path.split(os.sep)
            library = (
                "site-packages" in parts or "dist-packages" in parts or path.startswith(_HARNESS_DIR + os.sep)
            )
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


def _has_relative_import(path: str) -> bool:
    import ast

    from trainium_lens.harness.markers import read_source

    try:
        tree = ast.parse(read_source(path))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return False
    return any(isinstance(n, ast.ImportFrom) and n.level > 0 for n in ast.walk(tree))


def package_name(path: str, workspace_root: str) -> tuple[str, str] | None:
    """``(sys.path root, dotted module name)`` of a file inside a package, else None.

    Regular packages: walk up while the folder holds ``__init__.py``. A file with
    relative imports outside any regular package is a module of a namespace
    package rooted at the nearest ``src/`` folder, else at the workspace root."""
    path = os.path.realpath(path)
    folder = os.path.dirname(path)
    parts = [os.path.splitext(os.path.basename(path))[0]]
    while os.path.isfile(os.path.join(folder, "__init__.py")):
        parts.insert(0, os.path.basename(folder))
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    if len(parts) > 1:
        return folder, ".".join(parts)
    if not _has_relative_import(path):
        return None
    root = os.path.realpath(workspace_root)
    folder = os.path.dirname(path)
    names: list[str] = []
    while folder.startswith(root + os.sep) or folder == root:
        if folder == root or os.path.basename(folder) == "src":
            break
        names.insert(0, os.path.basename(folder))
        folder = os.path.dirname(folder)
    if not names or not all(n.isidentifier() for n in names + parts):
        return None
    return folder, ".".join(names + parts)


def load_module(path: str, workspace_root: str, rel_file: str) -> ModuleType:
    """Import the file the way Python would, without running its ``if __name__ ==
    "__main__":`` block: by dotted name when it sits in a package (see
    ``package_name``), else by path under a private module name. The workspace
    root and the file's folder (or the package root) go on ``sys.path`` so its
    own imports work as they do for the user."""
    import importlib

    found = package_name(path, workspace_root)
    if found is not None:
        root, dotted = found
        top = dotted.split(".")[0]
        loaded = sys.modules.get(top)
        loaded_from = getattr(loaded, "__file__", None) or next(iter(getattr(loaded, "__path__", [])), "")
        if loaded is None or os.path.realpath(str(loaded_from)).startswith(root + os.sep):
            for entry in (workspace_root, root):
                if entry in sys.path:
                    sys.path.remove(entry)
                sys.path.insert(0, entry)
            module = importlib.import_module(dotted)
            if os.path.realpath(getattr(module, "__file__", "") or "") == os.path.realpath(path):
                return module
            # an installed copy of the package shadowed the workspace's: load by path
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


def resolve(module: ModuleType, name: str) -> Any:
    """A marked function (``f``) or method (``Class.method``) of the module."""
    value: Any = module
    for part in name.split("."):
        value = getattr(value, part, None)
        if value is None:
            return None
    return value


def resolve_include(name: str) -> tuple[str, str] | None:
    """``(location, sys.path root)`` of an installed module or package: a package's
    folder or a module's file, and the folder module paths are relative to.
    None when nothing of that name is installed."""
    if not all(part.isidentifier() for part in name.split(".")):
        return None
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError, AttributeError):
        return None
    if spec is None:
        return None
    depth = name.count(".") + 1
    if spec.submodule_search_locations:
        location = os.path.realpath(list(spec.submodule_search_locations)[0])
        root = location
        for _ in range(depth):
            root = os.path.dirname(root)
    elif spec.origin and os.path.isfile(spec.origin):
        location = os.path.realpath(spec.origin)
        root = os.path.dirname(location)
        for _ in range(depth - 1):
            root = os.path.dirname(root)
    else:
        return None
    return location, root


def call_inputs(
    module: ModuleType, name: str, rel_file: str, for_fn: str, user: UserCode, device: Any = None
) -> tuple[tuple, dict]:
    """Run the ``inputs=`` function: a tuple is positional args, a dict keyword args.
    A function with a ``device`` parameter gets the backend's device (it may
    build its tensors and model there); it may require no other parameter."""
    make = getattr(module, name, None)
    if not callable(make):
        raise HarnessError(
            "inputs", f"inputs={name} (for {for_fn}) names no function in {rel_file}", rel_file, None
        )
    takes_device = _takes_device(make)
    other = [p for p in required_params(make) if p not in ("device", "rank", "world_size")]
    if other:
        code = getattr(make, "__code__", None)
        file = user.code_rel(code) if code is not None else None
        line = code.co_firstlineno if code is not None else None
        where = f"{file}:{line}: " if file else ""
        raise HarnessError(
            "inputs",
            f"{where}inputs function {name}() needs "
            f"{', '.join(other)}: it may take only `device` (the backend's device), "
            f"`rank` and `world_size`",
            file or rel_file,
            line,
        )
    try:
        extra = inputs_kwargs(make)  # rank/world_size when it declares them (torchrun jobs)
        value = make(device=device, **extra) if takes_device else make(**extra)
    except Exception as exc:  # the user's code: report where it failed
        raise user.error_from(exc, "inputs", f"inputs function {name}()") from None
    if isinstance(value, tuple):
        return value, {}
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise HarnessError("inputs", f"{name}() returned a dict with non-string keys", rel_file, None)
        return (), dict(value)
    raise HarnessError(
        "inputs",
        f"{name}() must return a tuple (positional arguments) or a "
        f"dict (keyword arguments), got {type(value).__name__}",
        rel_file,
        None,
    )


def required_params(fn: Callable[..., Any]) -> list[str]:
    import inspect

    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return []
    return [
        p.name
        for p in sig.parameters.values()
        if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    ]


def _takes_device(fn: Callable[..., Any]) -> bool:
    import inspect

    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    p = params.get("device")
    return p is not None and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)

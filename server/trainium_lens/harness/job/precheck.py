"""Checks that need only the source, run before importing torch (seconds) so
that the common mistakes are reported at once. The same checks run again on
the live objects later (a decorator may change a signature)."""

from __future__ import annotations

import ast

from trainium_lens.harness.events import HarnessError
from trainium_lens.harness.markers import Marked, markable_defs


def _top_level_names(tree: ast.Module) -> set[str] | None:
    """Names bound at module level, or None if a star import makes it unknowable."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.name == "*":
                    return None
                names.add((alias.asname or alias.name).split(".")[0])
        else:
            for sub in ast.walk(node):  # assignments, also inside if/try at top level
                if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                    names.add(sub.id)
    return names


def _required(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    args = fn.args
    positional = args.posonlyargs + args.args
    required = [a.arg for a in positional[: len(positional) - len(args.defaults)]]
    required += [a.arg for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is None]
    return required


def check(source: str, chosen: list[Marked], rel_file: str) -> None:
    tree = ast.parse(source)
    defs = dict(markable_defs(tree))  # functions and Class.method
    names = _top_level_names(tree)
    for m in chosen:
        node = defs.get(m.name)
        inputs = m.options.get("inputs")
        if inputs:
            if names is not None and inputs not in names:
                raise HarnessError(
                    "inputs",
                    f"inputs={inputs} (for {m.name}) names no function in {rel_file}",
                    rel_file,
                    m.marker_line,
                )
        elif node is not None and not node.decorator_list:
            missing = _required(node)
            if missing:
                raise HarnessError(
                    "inputs",
                    f"{m.name} needs arguments ({', '.join(missing)}): "
                    f"add inputs=NAME to its marker, naming a function that "
                    f"returns them as a tuple or dict" + (" (the instance first)" if "." in m.name else ""),
                    rel_file,
                    m.marker_line,
                )

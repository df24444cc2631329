"""A cell as the kernel knows it: the file name it compiled the cell under, the cell's
raw text, and its body compiled under that name at the editor's line numbers.

ipykernel names a cell's code ``<tempdir>/ipykernel_<pid>/<murmur2 of the raw cell>.py``
(ipykernel's ``get_file_name``; docs/notebooks.md); plain IPython ``<ipython-input-N-<hash>>``.
A cell magic receives the body without its ``%%`` line: compiled as it comes, every
line would read one less than the editor's, and under a name no editor can match.
So the body is compiled under the whole cell's name with its lines shifted, and the
whole raw cell is what ``linecache`` holds for that name (IPython keeps the magic's
rewritten one-line call there): tracebacks and the result's line texts read the cell.
"""

from __future__ import annotations

import ast
import linecache
import os
from dataclasses import dataclass
from types import CodeType
from typing import Any

from trainium_lens.errors import UsageError
from trainium_lens.model.cells import CELL_FOLDER


@dataclass
class Cell:
    filename: str  # the kernel's file name for the whole cell
    raw: str  # the whole cell as typed, the magic's line included
    first: int  # the 1-based cell line the magic is on

    @property
    def rel(self) -> str:
        return cell_rel(self.filename)

    @property
    def last(self) -> int:
        return max(self.first, len(self.raw.splitlines()))


def cell_rel(filename: str) -> str:
    """The name results give a cell: its kernel file name's last part, which is the
    hash of its text (an editor holding the text computes the same)."""
    base = os.path.basename(filename) if not filename.startswith("<") else filename.strip("<>")
    return f"{CELL_FOLDER}/{base}"


def cell_names(cell_filename: str) -> Any:
    """The predicate ``UserCode.cell_name`` takes: every file the kernel compiled a cell
    under (the current cell's folder, or IPython's ``<ipython-input-…>`` names)."""
    folder = os.path.dirname(cell_filename)

    def name(filename: str) -> str | None:
        if filename.startswith("<ipython-input-") or (folder and os.path.dirname(filename) == folder):
            return cell_rel(filename)
        return None

    return name


def current_cell(shell: Any, magic_line: str, body: str | None) -> Cell:
    """The cell being run: its kernel file name and raw text (from the history, which
    IPython stores before it runs a cell)."""
    count = getattr(shell, "execution_count", 0)
    raw = None
    history = getattr(getattr(shell, "history_manager", None), "input_hist_raw", None)
    if history:
        raw = history[-1]
    if raw is None or (body is not None and body.strip() and body.strip() not in raw):
        raw = f"%%trainium_lens {magic_line}\n{body}" if body is not None else f"%trainium_lens {magic_line}"
    filename = _kernel_name(shell, raw, count)
    lines = raw.splitlines()
    marker = "%%trainium_lens" if body is not None else "%trainium_lens"
    first = next((i + 1 for i, text in enumerate(lines) if text.lstrip().startswith(marker)), 1)
    return Cell(filename, raw, first)


def _kernel_name(shell: Any, raw: str, count: int) -> str:
    compiler = getattr(shell, "compile", None)
    named = getattr(compiler, "_filename_map", None)  # IPython's cache: name -> execution count
    if isinstance(named, dict):
        for name, number in reversed(list(named.items())):
            if number == count:
                return str(name)
    get = getattr(compiler, "get_code_name", None)
    if get is not None:
        return str(get(raw, raw, count))
    return f"<ipython-input-{count}-trainium-lens>"


def remember(cell: Cell) -> None:
    """The whole cell in ``linecache`` under its name (see the module docstring)."""
    lines = [line + "\n" for line in cell.raw.splitlines()]
    linecache.cache[cell.filename] = (len(cell.raw), None, lines, cell.filename)


def compile_body(shell: Any, cell: Cell, body: str) -> CodeType:
    """``body`` compiled under the cell's name, its first line on the cell line after
    the magic's; a syntax error is the user's, at its cell line."""
    return _compile(shell, cell, body, cell.first)


def compile_statement(shell: Any, cell: Cell, statement: str) -> CodeType:
    """``%trainium_lens STATEMENT``: the statement at the magic's own cell line."""
    if not statement.strip():
        raise UsageError(
            "%trainium_lens needs a statement to profile, e.g. %trainium_lens step(model, batch)"
        )
    return _compile(shell, cell, statement, cell.first - 1)


def _compile(shell: Any, cell: Cell, text: str, shift: int) -> CodeType:
    flags = getattr(getattr(shell, "compile", None), "flags", 0)
    try:
        tree = ast.parse(text, cell.filename)
    except SyntaxError as exc:
        if exc.lineno is not None:
            exc.lineno += shift
        raise
    ast.increment_lineno(tree, shift)
    return compile(tree, cell.filename, "exec", flags=flags, dont_inherit=True)


#: What a loop's body calls to make a step: ``opt.step()``, ``scheduler.step()``,
#: ``train_step(batch)``, ``xm.optimizer_step(opt)``.
def _is_step_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
    return name == "step" or name.endswith("_step")


def loops_over_steps(body: str) -> bool:
    """Whether the cell loops over its own steps, read from its text (it runs once,
    so the rule cannot ask a trial run): a ``for``/``while`` loop among the cell's own
    statements (not in a ``def``/``class`` body, which the cell only defines) that
    calls ``step`` or a ``*_step`` anywhere inside it. ``--loop``/``--one-step`` say
    otherwise where the rule is wrong (docs/notebooks.md)."""
    try:
        tree = ast.parse(body)
    except SyntaxError:
        return False  # compiled later, where the error is the user's, at its line

    def visit(node: ast.AST, in_loop: bool) -> bool:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            return False
        if in_loop and _is_step_call(node):
            return True
        inside = in_loop or isinstance(node, (ast.For, ast.AsyncFor, ast.While))
        return any(visit(child, inside) for child in ast.iter_child_nodes(node))

    return visit(tree, False)

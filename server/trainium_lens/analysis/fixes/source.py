"""Source positions shared by the edit builders: a node's text, an edit of it."""

from __future__ import annotations

import ast

from trainium_lens.harness.markers import source_lines
from trainium_lens.model.result import Edit


def segment(text: str, node: ast.AST) -> str:
    return ast.get_source_segment(text, node) or ""


def range_text(text: str, start_line: int, start_col: int, end_line: int, end_col: int) -> str:
    """The text of ``[start_line:start_col, end_line:end_col)`` (1-based lines, columns
    in characters of the line)."""
    lines = source_lines(text, keepends=True)
    if not (1 <= start_line <= end_line <= len(lines)):
        return ""
    if start_line == end_line:
        return lines[start_line - 1][start_col:end_col]
    return (
        lines[start_line - 1][start_col:]
        + "".join(lines[start_line : end_line - 1])
        + lines[end_line - 1][:end_col]
    )


def apply(text: str, edit: Edit) -> str:
    """``text`` with ``edit`` applied (the caller checked ``range_text == edit.original``)."""
    lines = source_lines(text, keepends=True)
    head = "".join(lines[: edit.start_line - 1]) + lines[edit.start_line - 1][: edit.start_col]
    tail = lines[edit.end_line - 1][edit.end_col :] + "".join(lines[edit.end_line :])
    return head + edit.replacement + tail


def holds(text: str, edit: Edit) -> bool:
    """The edit's range still holds the text it was built against."""
    return range_text(text, edit.start_line, edit.start_col, edit.end_line, edit.end_col) == edit.original


def edit_of(
    text: str, file: str, first: ast.AST, last: ast.AST, replacement: str, title: str, function: str
) -> Edit:
    """An edit replacing ``first`` through ``last`` (statements or one expression)."""
    lines = source_lines(text, keepends=True)
    start_line = first.lineno  # type: ignore[attr-defined]
    end_line = last.end_lineno or start_line  # type: ignore[attr-defined]
    start_col = _chars(lines[start_line - 1], first.col_offset)  # type: ignore[attr-defined]
    end_col = _chars(lines[end_line - 1], last.end_col_offset or 0)  # type: ignore[attr-defined]
    return Edit(
        file=file,
        start_line=start_line,
        start_col=start_col,
        end_line=end_line,
        end_col=end_col,
        replacement=replacement,
        original=range_text(text, start_line, start_col, end_line, end_col),
        title=title,
        function=function,
    )


def _chars(line: str, byte_col: int) -> int:
    """``ast`` counts columns in UTF-8 bytes; edits count characters."""
    return len(line.encode("utf-8")[:byte_col].decode("utf-8", errors="ignore"))


def enclosing_function(tree: ast.AST, line: int) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The innermost ``def`` holding ``line``."""
    best = None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if node.lineno <= line <= (node.end_lineno or node.lineno):
                if best is None or node.lineno >= best.lineno:
                    best = node
    return best


def imports_torch(tree: ast.Module) -> bool:
    """``import torch`` at the module's top level (the name a replacement uses)."""
    return any(
        isinstance(node, ast.Import) and any(a.name == "torch" and a.asname is None for a in node.names)
        for node in tree.body
    )

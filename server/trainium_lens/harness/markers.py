"""Find functions marked for profiling: ``# trainium: profile [key=value ...]``.

Stdlib only: the language server imports this module too (for code lenses),
and it runs on targets where only the harness is present.

The marker is a comment on the line directly above a module-level ``def`` or
above its first decorator. Options are kept as raw strings here; the harness
validates them (unknown keys are an error at run time, with the marker's line).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

MARKER_RE = re.compile(r"^\s*#\s*trainium:\s*profile\b(?P<rest>.*)$")

#: Option keys the harness understands (everything else is reported at run time).
KNOWN_OPTIONS = ("inputs", "wait", "warmup", "active", "timing_calls", "nproc")


@dataclass
class Marked:
    name: str
    def_line: int  # 1-based line of the ``def``
    marker_line: int  # 1-based line of the ``# trainium: profile`` comment
    end_line: int  # last line of the function
    options: dict[str, str] = field(default_factory=dict)


def parse_options(rest: str) -> dict[str, str]:
    """``inputs=make warmup=3`` → ``{"inputs": "make", "warmup": "3"}``.

    A word without ``=`` is kept with an empty value so the harness can say
    which option lacks one; text after a second ``#`` is a comment.
    """
    rest = rest.split("#", 1)[0]
    options: dict[str, str] = {}
    for word in rest.split():
        key, _, value = word.partition("=")
        options[key.strip()] = value.strip()
    return options


def find_marked(source: str) -> list[Marked]:
    """Marked module-level functions in file order; ``SyntaxError`` if it does not parse."""
    tree = ast.parse(source)
    lines = source.splitlines()
    found: list[Marked] = []
    for node in tree.body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        first = min([node.lineno] + [d.lineno for d in node.decorator_list])
        marker_line = first - 1
        if marker_line < 1 or marker_line > len(lines):
            continue
        match = MARKER_RE.match(lines[marker_line - 1])
        if not match:
            continue
        found.append(Marked(
            name=node.name,
            def_line=node.lineno,
            marker_line=marker_line,
            end_line=getattr(node, "end_lineno", None) or node.lineno,
            options=parse_options(match.group("rest")),
        ))
    return found

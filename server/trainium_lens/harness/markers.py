"""Find functions marked for profiling: ``# trainium: profile [key=value ...]``.

Stdlib only: the language server imports this module too (for code lenses),
and it runs on targets where only the harness is present.

The marker is a comment on the line directly above a module-level ``def``, a
method of a module-level class (named ``Class.method``), or above its first
decorator. A marker above any other ``def`` (a nested function, a method of a
nested class) is *misplaced*: ``misplaced_markers`` lists those so the harness
can say so. Options are kept as raw strings here; the harness validates them
(unknown keys are an error at run time, with the marker's line).
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import dataclass, field

# A line as Python's tokenizer counts them (and ``ast``, the profiler's frames, the
# editor): only ``\n``, ``\r\n`` and ``\r`` end one. ``str.splitlines`` also splits on
# \f, \v, \x1c-\x1e, \x85, U+2028 and U+2029, which a source may hold (in a string,
# a comment, a form feed between sections): every later line would be off by one.
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def source_lines(text: str, keepends: bool = False) -> list[str]:
    """``text``'s lines, the one definition of a line everywhere (the marker parser,
    the attribution's source text, the text shown for a line, ``fix``'s edits)."""
    lines = _LINE.findall(text)
    if keepends:
        return lines
    return [ln.rstrip("\r\n") if ln.endswith(("\n", "\r")) else ln for ln in lines]


MARKER_RE = re.compile(r"^\s*#\s*trainium:\s*profile\b(?P<rest>.*)$")

#: Option keys the harness understands (everything else is reported at run time).
KNOWN_OPTIONS = (
    "inputs",
    "wait",
    "warmup",
    "active",
    "timing_calls",
    "include",
    "compare",
    "nproc",
    "paired_s",
)
MAX_PAIRED_S = 600  # paired_s=: seconds a comparison may time its variants in turn (eager/paired.py)


def paired_seconds(options: dict[str, str]) -> int:
    """``paired_s=`` as a number of seconds (0: the fixed rounds, no verdict sought);
    ``ValueError`` for anything but an integer 0 … ``MAX_PAIRED_S``."""
    raw = options.get("paired_s")
    if raw is None:
        return 0
    if not raw.isdigit() or int(raw) > MAX_PAIRED_S:
        raise ValueError(f"paired_s must be a whole number of seconds, 0 to {MAX_PAIRED_S}, got {raw!r}")
    return int(raw)


@dataclass
class Marked:
    name: str  # ``function`` or ``Class.method``
    def_line: int  # 1-based line of the ``def``
    marker_line: int  # 1-based line of the ``# trainium: profile`` comment
    end_line: int  # last line of the function
    options: dict[str, str] = field(default_factory=dict)


def read_source(path) -> str:
    """A Python file's text, decoded as Python decodes it: a PEP 263 coding
    declaration (``# coding: latin-1``) or a UTF-8 BOM, else UTF-8. Raises
    ``OSError``, ``UnicodeDecodeError``, or ``SyntaxError`` for an unknown encoding."""
    with open(path, "rb") as fh:
        data = fh.read()
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    return data.decode(encoding)


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


def variant_group(compare: str | None, inputs: str | None) -> str:
    """Which functions are variants of each other (the harness diffs their outputs,
    ``analysis.compare`` tables them): ``compare=NAME``, else their ``inputs=``
    function or having none (analysis.compare also needs equal output shapes)."""
    if compare:
        return f"compare:{compare}"
    return f"inputs:{inputs or ''}"


_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _marker(node: ast.AST, lines: list[str]) -> tuple[int, re.Match] | None:
    """The marker comment directly above ``node`` (or its first decorator)."""
    first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])  # type: ignore[attr-defined]
    marker_line = first - 1
    if marker_line < 1 or marker_line > len(lines):
        return None
    match = MARKER_RE.match(lines[marker_line - 1])
    return (marker_line, match) if match else None


def markable_defs(tree: ast.Module) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Module-level functions and methods of module-level classes, in file order."""
    out: list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]] = []
    for node in tree.body:
        if isinstance(node, _DEFS):
            out.append((node.name, node))
        elif isinstance(node, ast.ClassDef):
            out.extend((f"{node.name}.{sub.name}", sub) for sub in node.body if isinstance(sub, _DEFS))
    return out


def find_marked(source: str) -> list[Marked]:
    """Marked module-level functions and methods in file order; ``SyntaxError`` if
    it does not parse."""
    tree = ast.parse(source)
    lines = source_lines(source)
    found: list[Marked] = []
    for name, node in markable_defs(tree):
        hit = _marker(node, lines)
        if hit is None:
            continue
        marker_line, match = hit
        found.append(
            Marked(
                name=name,
                def_line=node.lineno,
                marker_line=marker_line,
                end_line=getattr(node, "end_lineno", None) or node.lineno,
                options=parse_options(match.group("rest")),
            )
        )
    return found


def duplicate_names(marked: list[Marked]) -> tuple[str, int, int] | None:
    """``(name, first def line, second def line)`` of the first marked name that
    appears twice (a later ``def`` replaces the earlier one at import, so both
    results would run the second and be stored as one function), else None."""
    seen: dict[str, int] = {}
    for m in marked:
        if m.name in seen:
            return m.name, seen[m.name], m.def_line
        seen[m.name] = m.def_line
    return None


def duplicate_message(rel_file: str, duplicate: tuple[str, int, int]) -> str:
    name, first, second = duplicate
    return (
        f"{rel_file}: two marked functions are named {name} (lines {first} and {second}): "
        f"the second replaces the first when the file is imported; rename one"
    )


def misplaced_markers(source: str) -> list[tuple[int, str, int]]:
    """``(marker line, function name, end line)`` of markers above a ``def`` that cannot be
    profiled by name: nested functions, methods of nested classes."""
    tree = ast.parse(source)
    lines = source_lines(source)
    markable = {id(node) for _name, node in markable_defs(tree)}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, _DEFS) and id(node) not in markable:
            hit = _marker(node, lines)
            if hit is not None:
                out.append((hit[0], node.name, getattr(node, "end_lineno", None) or node.lineno))
    return sorted(out)


def select(
    marked: list[Marked],
    functions: list[str] | tuple[str, ...],
    line: int | None,
    rel_file: str,
    source: str | None = None,
) -> list[Marked]:
    """The one rule for which marked functions a job profiles, in file order: those
    named in ``functions``; else the one containing ``line`` (1-based, from its marker
    to its end); else all. The harness, the language server and the warm slot all
    ask this, so they never disagree. ``source`` (when given) lets a line inside a
    nested marked function be named as such. Raises ``events.HarnessError`` with
    kind ``no_marked_function``, ``unknown_function`` or ``parse``."""
    from trainium_lens.harness.events import HarnessError

    if not marked:
        raise HarnessError(
            "no_marked_function",
            f"{rel_file} has no function marked with '# trainium: profile' (put it on the line above a def)",
            rel_file,
            None,
        )
    twice = duplicate_names(marked)
    if twice is not None:
        raise HarnessError("parse", duplicate_message(rel_file, twice), rel_file, twice[2])
    names = ", ".join(m.name for m in marked)
    if functions:
        by_name = {m.name for m in marked}
        for name in functions:
            if name not in by_name:
                raise HarnessError(
                    "unknown_function",
                    f"{name!r} is not a marked function of {rel_file} (marked: {names})",
                    rel_file,
                    None,
                )
        wanted = set(functions)
        return [m for m in marked if m.name in wanted]
    if line is not None:
        for m in marked:
            if min(m.marker_line, m.def_line) <= line <= m.end_line:
                return [m]
        for marker_line, name, end_line in misplaced_markers(source) if source is not None else []:
            if marker_line <= line <= end_line:
                raise HarnessError(
                    "parse",
                    f"{rel_file}:{marker_line}: the marker is above {name}(), a nested function: only "
                    f"module-level functions and methods of module-level classes can be profiled",
                    rel_file,
                    marker_line,
                )
        raise HarnessError(
            "unknown_function",
            f"line {line} of {rel_file} is not inside a marked function (marked: {names})",
            rel_file,
            line,
        )
    return list(marked)

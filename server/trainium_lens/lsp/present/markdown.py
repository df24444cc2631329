"""Markdown that reaches the editor: stored strings escaped.

Result files are data (a name can hold ``*``, ``|`` or ``[...](command:...)``);
hovers render Markdown trusted (for their command links), so every stored string
put into Markdown text goes through ``escape``, and into a code span through
``code``.
"""

from __future__ import annotations

_SPECIAL = "\\`*_[]()<>#|!{}+-.~"


def escape(text: str) -> str:
    """``text`` shown literally in Markdown (backslash before each special character)."""
    return "".join("\\" + ch if ch in _SPECIAL else ch for ch in str(text))


def code(text: str) -> str:
    """``text`` as an inline code span: backslashes do not escape inside one, so the
    fence is longer than any run of backticks in it (CommonMark), and ``|`` (a table
    cell's end even inside a span) is replaced by its look-alike ``¦``."""
    text = str(text).replace("|", "¦").replace("\n", " ")
    longest = run = 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"

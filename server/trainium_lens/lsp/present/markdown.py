"""Markdown that reaches the editor: stored strings (function names, file
paths, op names from a result) escaped so they read as text, never as markup.

The client renders hover and panel markdown *trusted* (for command links), so
a stored string must not be able to open a link, an image or HTML.
"""

from __future__ import annotations

import re

# CommonMark's ASCII punctuation that can start or end markup (emphasis, links,
# images, headings, tables, code, HTML, braces some renderers template).
_SPECIAL = re.compile(r"([\\`*_\[\]()<>#|!{}~+\-.])")


def escape(text: str) -> str:
    """``text`` with every markdown-special character backslash-escaped."""
    return _SPECIAL.sub(r"\\\1", text)


def code(text: str, limit: int = 80) -> str:
    """``text`` as an inline code span inside a table cell: backticks cannot
    be escaped in a span, so they become ``'``; ``|`` is escaped for the table
    (GFM reads it before the span)."""
    return "`" + text[:limit].replace("`", "'").replace("|", "\\|") + "`"

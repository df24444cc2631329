"""Markdown that reaches the editor: stored strings escaped.

A result is a file on disk (or from another host): its messages, source text
and names are data, never markup. Everything taken from a result into hover
or panel markdown goes through ``escape``.
"""

from __future__ import annotations

import re

_SPECIAL = re.compile(r"([\\`*_\[\]()<>#|!{}~+\-.&])")


def escape(text: object) -> str:
    """``text`` shown literally in CommonMark (backslash-escaped punctuation)."""
    return _SPECIAL.sub(r"\\\1", str(text)).replace("\n", " ")

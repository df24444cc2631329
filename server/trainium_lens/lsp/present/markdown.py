"""Stored strings made safe to put in the editor's Markdown.

Hovers are rendered *trusted* (their command links must work), so text that
comes from a result file — source lines, commit names, hosts — must never be
read as Markdown or HTML: each special character is backslash-escaped.
"""

from __future__ import annotations

_SPECIAL = set("\\`*_{}[]()<>#+-.!|~&")


def escape(text: str) -> str:
    """``text`` shown literally in Markdown (CommonMark backslash escapes; newlines as spaces)."""
    return "".join("\\" + c if c in _SPECIAL else c for c in str(text).replace("\r", " ").replace("\n", " "))

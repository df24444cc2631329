"""Markdown for the editor from stored strings: a result file is data, and a
string in it (a device name, a source note, a file path) must never turn into
markup, links or commands in a hover."""

from __future__ import annotations

import re

_SPECIAL = re.compile(r"([\\`*_\[\](){}<>#|!~+\-.])")


def escape(text: object) -> str:
    """``text`` with every Markdown-significant character backslash-escaped."""
    return _SPECIAL.sub(r"\\\1", str(text))

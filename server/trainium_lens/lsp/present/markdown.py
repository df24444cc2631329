"""Markdown the editor renders, built safely from stored strings.

Hovers are rendered as *trusted* markdown (the client enables two command links
in them), and a stored result is untrusted data: op names, the host, run ids,
finding texts can hold markdown of their own. Every stored string goes through
``escape`` (text) or ``code`` (a code span), so none can add a link, an image
(a remote image loads by itself), HTML or a bare URL that linkifies; command
links come only from ``command_link``, for the commands this server offers.
"""

from __future__ import annotations

import json
import re
from urllib.parse import quote

#: The commands a hover may link to (the client enables exactly these).
LINK_COMMANDS = frozenset({"trainiumLens.openTimeline", "trainiumLens.openExplorer"})

# CommonMark: any ASCII punctuation may be backslash-escaped, and then reads as
# itself. Escaped: everything that opens markup, links, images, HTML, entities,
# tables or theme icons (``$(...)``), and ``.``, ``:`` and ``/``, which breaks
# what linkify would turn into a link (``https://``, ``www.``). ``-`` and ``+``
# mean something only at the start of a line (a list), where they are escaped.
_PUNCT = re.compile(r"""([!"#$&'()*./:<>\[\\\]_`{|}~])""")
_BREAKS = re.compile(r"[\x00-\x1f\x7f\u2028\u2029]+")


def _one_line(text: object) -> str:
    return _BREAKS.sub(" ", str(text))


def escape(text: object) -> str:
    """``text`` as literal markdown text on one line (no markup, no links, no HTML)."""
    out = _PUNCT.sub(r"\\\1", _one_line(text))
    return "\\" + out if out[:1] in ("-", "+") else out


def code(text: object, *, in_table: bool = False) -> str:
    """``text`` as an inline code span (nothing inside one is markup); the fence is
    longer than any run of backticks in it. In a table cell a ``|`` is escaped
    (GFM splits cells on it even inside code; the escape shows as ``|``)."""
    body = _one_line(text)
    if in_table:
        body = body.replace("|", "\\|")
    longest = max((len(run) for run in re.findall(r"`+", body)), default=0)
    fence = "`" * (longest + 1)
    if body.startswith("`") or body.endswith("`") or not body.strip():
        body = f" {body} "
    return f"{fence}{body}{fence}"


def command_link(title: str, command: str, args: list) -> str:
    """``[title](command:...)`` for one of ``LINK_COMMANDS``, its arguments JSON."""
    if command not in LINK_COMMANDS:
        raise ValueError(f"not a command a hover links to: {command}")
    return f"[{escape(title)}](command:{command}?{quote(json.dumps(args))})"

"""``present.markdown``: stored strings in trusted hover markdown. Rendered with
a CommonMark renderer (markdown-it, as VS Code's hovers are): hostile text stays
text, reads exactly as stored, and adds no link, image or HTML."""

from __future__ import annotations

import html
import re

import pytest

from trainium_lens.lsp.present.markdown import code, command_link, escape

HOSTILE = [
    "![x](https://evil.example/pixel.png)",
    "[Open timeline](command:trainiumLens.openTimeline?%5B%7B%22uri%22%3A%22file%3A%2F%2F%2Fetc%22%7D%5D)",
    "<img src=https://evil.example/p.png> <script>alert(1)</script>",
    "https://evil.example/a www.evil.example mail@evil.example",
    "**bold** _it_ `tick` ``two`` ~~del~~ $(zap) &amp; &#x41;",
    "- list\n# heading\n| a | b |\n---",
    "aten::mm | evil ` back\\slash",
    "1. ordered",
    "+ plus",
    "\\[x\\](command:x)",
]


def md():
    import markdown_it

    return markdown_it.MarkdownIt("commonmark").enable("table")


def visible(rendered: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", rendered)).strip()


@pytest.mark.parametrize("text", HOSTILE)
def test_escaped_text_renders_as_itself_and_nothing_more(text):
    rendered = md().render(f"before {escape(text)} after")
    assert not re.search(r"<(a|img|script|h\d|ul|ol|li|table|code|strong|em|del)\b", rendered), rendered
    assert visible(rendered) == "before " + " ".join(text.split("\n")) + " after"


@pytest.mark.parametrize("text", HOSTILE)
def test_a_code_span_in_a_table_cell_stays_one_cell(text):
    table = f"| op | n |\n| --- | ---: |\n| {code(text, in_table=True)} | 3 |"
    rendered = md().render(table)
    assert rendered.count("<td") == 2 and "<a" not in rendered and "<img" not in rendered
    cell = re.search(r"<td>(.*?)</td>", rendered, re.S)
    assert cell is not None and visible(cell.group(1)).strip() == " ".join(text.split("\n")).strip()


def test_links_only_to_the_commands_the_server_offers():
    link = command_link("Open [timeline]", "trainiumLens.openTimeline", [{"uri": "file:///a) b", "line": 3}])
    rendered = md().render(link)
    assert rendered.count("<a ") == 1 and 'href="command:trainiumLens.openTimeline?' in rendered
    with pytest.raises(ValueError):
        command_link("x", "workbench.action.terminal.sendSequence", [])

"""One definition of a line (``harness/markers.source_lines``, Python's tokenizer's:
only ``\\n``, ``\\r\\n`` and ``\\r`` end one): a form feed, \\v, \\x1c-\\x1e, \\x85,
U+2028 or U+2029 in a source must not shift the lines below it, for the marker
parser, the attribution's source text, the editor's lines or ``fix``."""

from __future__ import annotations

import ast

import pytest

from trainium_lens.analysis.fixes.source import apply, edit_of, holds, range_text
from trainium_lens.harness.attribution.build import SourceText
from trainium_lens.harness.markers import find_marked, misplaced_markers, source_lines

ODD = ["\x0c", "\x0b", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]


def source(odd: str) -> str:
    return (
        "import torch\n"
        f"\x0c\n"  # a form feed between sections, alone on its line (PEP 8 allows it)
        f'NOTE = "a{odd}b"  # {odd} inside a string and a comment\n'
        "\n"
        "\n"
        "# trainium: profile\n"
        "def f(x):\n"
        "    y = x * 2\n"
        "    return y\n"
    )


@pytest.mark.parametrize("odd", ODD)
def test_lines_are_the_tokenizers(odd):
    text = source(odd)
    assert (
        len(source_lines(text))
        == 9
        == max(getattr(n, "end_lineno", 0) or 0 for n in ast.walk(ast.parse(text)))
    )
    assert source_lines("a\r\nb\rc\nd") == ["a", "b", "c", "d"]
    assert "".join(source_lines(text, keepends=True)) == text


@pytest.mark.parametrize("odd", ODD)
def test_the_marker_is_found_on_its_line(odd):
    (m,) = find_marked(source(odd))
    assert (m.name, m.marker_line, m.def_line, m.end_line) == ("f", 6, 7, 9)
    nested = source(odd).replace(
        "def f(x):", "def f(x):\n    # trainium: profile\n    def g():\n        pass"
    )
    assert [(line, name) for line, name, _end in misplaced_markers(nested)] == [(8, "g")]


@pytest.mark.parametrize("odd", ODD)
def test_the_attribution_shows_each_lines_own_text(tmp_path, odd):
    (tmp_path / "m.py").write_text(source(odd), encoding="utf-8")
    text = SourceText(str(tmp_path))
    assert text.line("m.py", 8) == "y = x * 2" and text.line("m.py", 9) == "return y"


@pytest.mark.parametrize("odd", ODD)
def test_a_fix_lands_on_its_lines(odd):
    text = source(odd)
    tree = ast.parse(text)
    stmt = tree.body[-1].body[0]  # type: ignore[attr-defined]
    edit = edit_of(text, "m.py", stmt, stmt, "y = x + x", "t", "f")
    assert (edit.start_line, edit.original) == (8, "y = x * 2") and holds(text, edit)
    assert range_text(text, 8, 4, 8, 13) == "y = x * 2"
    assert apply(text, edit) == text.replace("y = x * 2", "y = x + x")


@pytest.mark.parametrize("odd", ODD)
def test_the_editors_lines_are_the_same_lines(odd):
    """The language server places hints on ``doc_lines`` (``str.splitlines`` would
    split where the editor does not): line 8 must be the line 8 the harness measured."""
    from types import SimpleNamespace

    from trainium_lens.lsp.state import LensServer

    doc = SimpleNamespace(version=1, source=source(odd))
    server = SimpleNamespace(workspace=SimpleNamespace(get_text_document=lambda uri: doc), _lines={})
    lines, version = LensServer.doc_lines(server, "file:///ws/m.py")  # type: ignore[arg-type]
    assert version == 1 and len(lines) == 9 and lines[7].strip() == "y = x * 2"

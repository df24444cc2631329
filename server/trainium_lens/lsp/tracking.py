"""Follow profiled lines through the user's edits.

A result names lines as they were when it was profiled. While the user types,
each annotated line moves with its text: ``LineTracker`` maps a profiled line
(1-based, as in results) to its line in the current document (0-based, as in
LSP), from the ranges of ``textDocument/didChange``. Whether an annotation is
*stale* is decided by comparing the current line's text with the text the
result recorded, so undoing an edit makes it fresh again.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence


class LineTracker:
    def __init__(self, positions: dict[int, int]):
        self.pos: dict[int, int] = dict(positions)  # profiled line -> current line
        self.touched: set[int] = set()  # profiled lines whose current line was edited

    @classmethod
    def place(cls, wanted: dict[int, str], doc_lines: Sequence[str]) -> LineTracker:
        """Place profiled lines in a document that may have moved on (opened after
        an edit made outside the editor, or profiled from a saved file while the
        buffer differs): the same line number when its text still matches, else
        the only line holding that text, else the same number (then stale)."""
        index: dict[str, list[int]] | None = None
        positions: dict[int, int] = {}
        for line, text in wanted.items():
            key = text.strip()
            here = line - 1
            if not key or (0 <= here < len(doc_lines) and doc_lines[here].strip() == key):
                positions[line] = here
                continue
            if index is None:
                index = {}
                for i, doc_line in enumerate(doc_lines):
                    index.setdefault(doc_line.strip(), []).append(i)
            found = index.get(key, [])
            positions[line] = found[0] if len(found) == 1 else here
        return cls(_unique(positions))

    def apply(self, start: tuple[int, int], end: tuple[int, int], text: str) -> None:
        """One incremental change: the range ``start``..``end`` (line, character)
        was replaced by ``text``."""
        (s, sc), (e, ec) = start, end
        added = text.count("\n")
        if s == e and added == 0:  # typing within one line: nothing moves
            if text or sc != ec:
                self.touched.update(key for key, line in self.pos.items() if line == s)
            return
        delta = added - (e - s)
        whole_lines = sc == 0 and ec == 0 and e > s  # lines s..e-1 replaced
        moved: dict[int, int] = {}
        for key, line in self.pos.items():
            if line < s:
                moved[key] = line
            elif line > e:
                moved[key] = line + delta
            elif line == e and ec == 0:
                # Line e's text starts right after the range: it survives, now
                # after the inserted text (an insertion at column 0 lands here).
                moved[key] = s + added
                if not (text == "" or text.endswith("\n")):
                    self.touched.add(key)
            elif whole_lines:
                continue  # the line was deleted: its figure stays in the result only
            elif line == s:
                moved[key] = s
                self.touched.add(key)
            elif line == e:
                moved[key] = s + added  # its tail joins the last inserted line
                self.touched.add(key)
            # lines strictly inside the range are gone
        # Only a line joined to the one above can land on an occupied line.
        self.pos = _unique(moved) if e > s and not whole_lines else moved

    def current(self, line: int) -> int | None:
        return self.pos.get(line)

    def items(self) -> Iterable[tuple[int, int]]:
        return self.pos.items()


def _unique(positions: dict[int, int]) -> dict[int, int]:
    """Two profiled lines joined into one: the earlier keeps its annotation."""
    seen: dict[int, int] = {}
    for key in sorted(positions):
        seen.setdefault(positions[key], key)
    return {key: line for line, key in seen.items()}


def is_stale(recorded: str, current: str | None, touched: bool) -> bool:
    if current is None:
        return True
    if recorded.strip():
        return recorded.strip() != current.strip()
    return touched  # no recorded text: an edit is all we know

"""How many times each labelled line ran (its *hits*), for dispatches per execution.

The line labeler sees every torch call with the Python frames it came from;
it tells ``HitCounter.note`` about each user frame on the way. One execution
of a line is told apart from the next by the frame's last instruction
(``f_lasti``) and by the frame it called into:

* a different frame object than last time: the line runs in a new call;
* an earlier instruction than last time: the line started again (a loop);
* the same instruction: the same execution if it called into the same child
  frame (``x = block(x)`` makes many torch calls inside one ``block`` call),
  a new one if the child differs (a loop calling ``block`` again) or if the
  torch call came straight from this line (one CALL instruction, one call);
* a later instruction: the same execution (``a(x) + b(x)``).

Frames are held until the labelled call ends (``end_call``), so a frame object
is never freed and its address reused while it is compared against.
"""

from __future__ import annotations

from types import FrameType
from typing import Any


class HitCounter:
    def __init__(self) -> None:
        self.hits: dict[str, int] = {}  # label name -> executions seen
        self._last: dict[str, tuple[FrameType, int, Any]] = {}

    def note(self, name: str, frame: FrameType, child: FrameType | None) -> None:
        lasti = frame.f_lasti
        last = self._last.get(name)
        if last is not None and last[0] is frame:
            _f, last_i, last_child = last
            if lasti > last_i or (lasti == last_i and child is not None and child is last_child):
                if lasti > last_i:
                    self._last[name] = (frame, lasti, child)
                return
        self.hits[name] = self.hits.get(name, 0) + 1
        self._last[name] = (frame, lasti, child)

    def end_call(self) -> None:
        """The labelled call returned: every execution it held is over."""
        self._last.clear()

    def clear(self) -> None:
        self.hits.clear()
        self._last.clear()


def add_hits(lines: list[dict], labels: dict, hits: dict[str, int], calls: int) -> None:
    """Set each result line's ``hits``: executions per call of the function."""
    by_place = {labels[name]: count for name, count in hits.items() if name in labels}
    for line in lines:
        count = by_place.get((line["file"], line["line"], line["function"]))
        line["hits"] = count / calls if count is not None and calls else None

"""A torchrun job's events on their way to the caller: rank 0's progress is shown,
other ranks' warnings and output are labelled, and the last word of each rank
is kept so a timeout can name the rank that hung."""

from __future__ import annotations

import time
from collections.abc import Callable


class RankEvents:
    """The event sink for a run: rank 0's progress passes, other ranks' warnings
    and output are labelled (duplicates dropped), and each rank's last stage is
    kept to name a hung rank when the run times out."""

    def __init__(self, sink: Callable[[dict], None], clock: Callable[[], float] = time.monotonic) -> None:
        self.sink = sink
        self.clock = clock
        self.last: dict[int, str] = {}
        # rank -> (its note, what it waits in and where, when the wait began here)
        self.waiting: dict[int, tuple[str, str | None, float | None]] = {}
        self.world_size = 0
        self._warnings: set[str] = set()

    def __call__(self, event: dict) -> None:
        rank = event.get("rank")
        kind = event.get("event")
        if not isinstance(rank, int):
            if kind == "stage" and event.get("stage") == "launch":
                digits = "".join(c for c in str(event.get("message", "")) if c.isdigit())
                self.world_size = int(digits) if digits else 0
            self.sink(event)
            return
        if kind == "stage":
            if event.get("stage") == "collective":
                waited = event.get("waited_s")
                began = self.clock() - waited if isinstance(waited, (int, float)) else None
                what = f"{event.get('collective')} at {event.get('where')}" if event.get("where") else None
                self.waiting[rank] = (str(event.get("message", "")), what, began)
            else:
                self.waiting.pop(rank, None)
                self.last[rank] = f"{event.get('stage')}: {event.get('message', '')}"
            if rank != 0 and event.get("stage") != "collective":
                return  # one progress line per run: rank 0's
        elif kind == "warning":
            text = str(event.get("message", ""))
            if text in self._warnings:
                return
            self._warnings.add(text)
            if rank != 0:
                event = {**event, "message": f"rank {rank}: {text}"}
        elif kind == "output" and rank != 0:
            event = {**event, "text": f"[rank {rank}] {event.get('text', '')}"}
        self.sink(event)

    def explain(self, reason: str) -> str:
        """``reason`` (e.g. "timed out after 60 s") plus where each rank was."""
        if not self.last and not self.waiting:
            return reason
        parts = [self._wait_note(rank, *note) for rank, note in sorted(self.waiting.items())]
        ranks = sorted(set(self.last) | set(range(self.world_size)))
        behind = [r for r in ranks if r not in self.waiting]
        if self.waiting and behind:
            parts.append(
                "never joined it: "
                + "; ".join(f"rank {r} (last: {self.last.get(r, 'not started')})" for r in behind)
            )
        elif not self.waiting:
            parts.extend(f"rank {r}: {self.last.get(r, 'not started')}" for r in ranks)
        return f"{reason}; " + "; ".join(parts)

    def _wait_note(self, rank: int, message: str, what: str | None, began: float | None) -> str:
        """How long RANK has waited by now (the harness's note was sent after the
        first seconds; a timeout a minute later must not repeat "3 s")."""
        if what is None or began is None:
            return message
        return f"rank {rank} has waited {self.clock() - began:.0f} s in {what}"

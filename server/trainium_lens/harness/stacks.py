"""Walking a stack of parent-linked frames to its user frames (stdlib only).

Profilers and compilers store a call stack as frames that name their parent by
id. The harness (xla/attribution.py, over an HLO module's stack-frame index) and
the core's Neuron device-profile reader (traces/neuron_profile.py, over its StackFrame
table) share this one walk, the way they share intervals.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

Place = TypeVar("Place")


def user_places(frame_id: int, frame: Callable[[int], tuple[Place | None, int] | None]) -> list[Place]:
    """The places along a stack, innermost first, each once.

    ``frame(id)`` answers ``(place, parent id)``, place ``None`` for a frame outside
    user code, or ``None`` for an unknown id; an id of 0 (or below) is the end. A
    cycle of parent ids ends the walk too."""
    out: list[Place] = []
    seen: set[int] = set()
    while frame_id > 0 and frame_id not in seen:
        seen.add(frame_id)
        found = frame(frame_id)
        if found is None:
            break
        place, frame_id = found
        if place is not None and place not in out:
            out.append(place)
    return out

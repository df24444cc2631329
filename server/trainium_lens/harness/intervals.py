"""The length of a union of time intervals (stdlib only).

Device engines and host threads run instructions in parallel: a line's time is
the time at least one of its instructions was running, not the sum of their
durations. The harness (xla/attribution.py) and the core's Neuron device-profile
reader (traces/neuron_profile.py, which may import stdlib-only harness modules the way
the language server imports markers.py) share this one definition.
"""

from __future__ import annotations

from collections.abc import Iterable


def union_length(intervals: Iterable[tuple[float, float]]) -> float:
    """Total length covered by ``[start, end)`` intervals, overlaps counted once."""
    total, end = 0.0, None
    for s, e in sorted(intervals):
        if end is None or s > end:
            total += e - s
            end = e
        elif e > end:
            total += e - end
            end = e
    return total

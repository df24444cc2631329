"""Which profiled events belong to which step, on every thread.

The profiler's ``ProfilerStep#N`` ranges exist on the thread that called
``prof.step()`` only. Work of the same step can run elsewhere: the autograd
engine runs the backward of device tensors on its own device thread (and a
user may call ``backward()`` from a thread of their own). Those threads' root
events carry no step; a step owns every root that *starts* inside its time
window, whatever its thread, so nothing recorded during a step is dropped.

A step's *forest* is its ``ProfilerStep`` range followed by the other threads'
roots in its window (thread, then start order): the attribution walks a forest
as one unit (forward on the main thread first, so the backward on another
thread finds the forward ops it links to), and the CPU path's labelled/plain
twins are compared forest against forest.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from typing import Any


class Forests:
    """Steps of one profile and the roots of each (see the module docstring)."""

    def __init__(self, events: Iterable[Any], cpu_device_type: Any = None):
        cpu = cpu_device_type
        roots = [e for e in events if e.cpu_parent is None and (cpu is None or e.device_type == cpu)]
        steps = sorted(
            (e for e in roots if e.name.startswith("ProfilerStep")), key=lambda e: e.time_range.start
        )
        self.steps = steps
        self.main_thread = steps[0].thread if steps and hasattr(steps[0], "thread") else None
        starts = [s.time_range.start for s in steps]
        ends = [s.time_range.end for s in steps]
        # roots by step index (the step's own range first); -1: in no step's window
        self.roots: dict[int, list[Any]] = {i: [s] for i, s in enumerate(steps)}
        self.outside: list[Any] = []
        extra: dict[int, list[Any]] = {}
        step_ids = {id(s) for s in steps}
        for e in roots:
            if id(e) in step_ids:
                continue
            t = e.time_range.start
            i = bisect.bisect_right(starts, t) - 1
            if i >= 0 and t <= ends[i] and getattr(e, "thread", None) != self.main_thread:
                extra.setdefault(i, []).append(e)
            else:
                self.outside.append(e)
        for i, more in extra.items():
            more.sort(key=lambda e: (e.thread, e.time_range.start))
            self.roots[i].extend(more)
        self.outside.sort(key=lambda e: e.time_range.start)

    def forest(self, index: int) -> list[Any]:
        return self.roots.get(index, [])


class LabelIndex:
    """Innermost line label open at a given instant on the main thread of one step.

    Fed with the label ranges in start order as the main thread is walked;
    queried (rarely: for backward work on another thread that has no forward
    partner) for the line that called ``backward()``."""

    __slots__ = ("starts", "items")

    def __init__(self) -> None:
        self.starts: list[float] = []
        self.items: list[tuple[float, float, str, tuple, int]] = []  # start, end, key, chain, parent

    def add(self, start: float, end: float, key: str, chain: tuple, parent: int) -> int:
        self.starts.append(start)
        self.items.append((start, end, key, chain, parent))
        return len(self.items) - 1

    def at(self, t: float) -> tuple[str, tuple] | None:
        i = bisect.bisect_right(self.starts, t) - 1
        while i >= 0:
            start, end, key, chain, parent = self.items[i]
            if start <= t <= end:
                return key, chain
            i = parent
        return None

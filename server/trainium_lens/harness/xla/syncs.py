"""Which user lines made torch-xla synchronize with the host, or run an op on the
CPU, in the middle of a step.

``xla/tags.py``'s mode calls ``SyncCounter`` around each torch call of a measured
step: counters before, the call, counters after (``torch_xla.debug.metrics``, read
through ``torch_xla._XLAC._xla_counter_value``: under a microsecond a read). A
call that made torch-xla execute a graph (``SCHEDULED``) or copy to the host
(``xla::_to_cpu``; ``.item()`` bumps ``aten::_local_scalar_dense``) is a
host–device sync on its line; one that bumped another ``aten::*`` counter ran that
op on the CPU (torch-xla's fallback).

A graph is counted where the host handed it to the runtime (its compile or cache
lookup, on the calling thread), not by ``ExecuteComputation``: the runtime bumps
that one when the graph runs, after a ``torch_xla.sync()`` has returned, so it
lands in whatever call the host traces next (after a ``MpDeviceLoader``'s sync at
each batch: the forward's first op, reported as a sync it never made).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

# every graph the host executes is compiled or found compiled first, synchronously
SCHEDULED = ("UncachedCompile", "CachedCompile")
TO_CPU = "xla::_to_cpu"
LOCAL_SCALAR = "aten::_local_scalar_dense"  # .item(): counted as a fallback by torch-xla, a sync here

Place = tuple[str, int, str]  # (workspace-relative file, line, function)
Counts = tuple[int, int, dict[str, int]]  # executions, transfers, fallback op -> runs


def scheduled(counter: Callable[[str], Any]) -> int:
    """Graphs the host has handed to the runtime so far (``counter``: a counter's value by name)."""
    return sum(counter(name) or 0 for name in SCHEDULED)


@dataclass
class LineSyncs:
    """What one line's calls made torch-xla do, summed over the measured steps."""

    calls: int = 0  # calls that synchronized or fell back
    executions: int = 0  # graphs executed inside those calls
    transfers: int = 0  # device→host copies inside them
    what: dict[str, int] = field(default_factory=dict)  # the torch call ("item", "__format__")
    fallbacks: dict[str, int] = field(default_factory=dict)  # aten op -> CPU runs


class SyncCounter:
    def __init__(self, counter: Callable[[str], Any], fallback_names: Callable[[], list[str]]):
        """``counter``: a counter's value by name (None: never bumped);
        ``fallback_names``: the ``aten::*`` counters torch-xla has bumped so far."""
        self._counter = counter
        self._fallback_names = fallback_names
        self.lines: dict[Place, LineSyncs] = {}

    def counts(self) -> Counts:
        count = self._counter
        fallbacks = {n: count(n) or 0 for n in self._fallback_names()}
        return scheduled(count), count(TO_CPU) or 0, fallbacks

    def note(self, place: Place, name: str, before: Counts) -> None:
        """After the call ``name`` on ``place``: what moved since ``before``."""
        executions, transfers, fallbacks = self.counts()
        ran = {op: n - before[2].get(op, 0) for op, n in fallbacks.items() if n > before[2].get(op, 0)}
        scalar = ran.pop(LOCAL_SCALAR, 0)
        executed = executions - before[0]
        copied = max(transfers - before[1], scalar)  # .item() bumps both
        if not (executed or copied or ran):
            return
        s = self.lines.setdefault(place, LineSyncs())
        s.calls += 1
        s.executions += executed
        s.transfers += copied
        s.what[name] = s.what.get(name, 0) + 1
        for op, n in ran.items():
            s.fallbacks[op] = s.fallbacks.get(op, 0) + n

    def signals(self, steps: int) -> dict[str, Any]:
        """The result's ``signals.host_syncs`` / ``xla_fallbacks``, per step."""
        n = max(steps, 1)
        syncs, fallbacks = [], []
        for (file, line, _function), s in sorted(self.lines.items()):
            if s.executions or s.transfers:
                syncs.append(
                    {
                        "file": file,
                        "line": line,
                        "calls": s.calls / n,
                        "graphs": s.executions / n,
                        "transfers": s.transfers / n,
                        "what": sorted(s.what, key=lambda w: -s.what[w]),
                    }
                )
            for op, count in sorted(s.fallbacks.items()):
                fallbacks.append({"op": op, "file": file, "line": line, "calls": count / n})
        return {"host_syncs": syncs, "xla_fallbacks": fallbacks}

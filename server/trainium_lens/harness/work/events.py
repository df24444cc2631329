"""The work step's op events, light: read straight from the profiler's C++ event
tree (``experimental_event_tree``) instead of ``prof.events()``.

``prof.events()`` builds a ``FunctionEvent`` per event with its memory and
stack fields; with shapes and allocations recorded that takes about as long
as the call itself again (bench/work_bench.py). The attribution pass
(``attribution/tree.py``) needs only names, the tree, times, threads and the
autograd sequence numbers, so ``Ev`` carries just those, plus the tree node
(its inputs' sizes and dtypes, the allocations under it) and, on demand, the
recorded shapes and scalar arguments from the matching kineto event (same
correlation id: lists such as a convolution's stride are only there).
"""

from __future__ import annotations

from typing import Any


class _Range:
    __slots__ = ("start", "end")

    def __init__(self, start: float, end: float):
        self.start, self.end = start, end


class Ev:
    """What ``attribution.tree.attribute`` reads of an event, and the work figures need."""

    __slots__ = (
        "name",
        "id",
        "cpu_parent",
        "cpu_children",
        "time_range",
        "sequence_nr",
        "thread",
        "fwd_thread",
        "kernels",
        "device_type",
        "node",
        "kineto",
    )

    def __init__(self, node: Any, parent: Ev | None, kineto: Any):
        self.name = node.name
        self.id = node.correlation_id
        self.cpu_parent = parent
        self.cpu_children: list[Ev] = []
        self.time_range = _Range(node.start_time_ns / 1000.0, node.end_time_ns / 1000.0)
        self.sequence_nr = getattr(node.extra_fields, "sequence_number", -1)
        self.thread = node.start_tid
        self.fwd_thread = kineto.fwd_thread_id() if kineto is not None else 0
        self.kernels: list = []
        self.device_type = None
        self.node = node
        self.kineto = kineto

    @property
    def input_shapes(self) -> list:
        return self.kineto.shapes() if self.kineto is not None else []

    @property
    def concrete_inputs(self) -> list:
        return self.kineto.concrete_inputs() if self.kineto is not None else []


def op_tag() -> Any:
    from torch._C._profiler import _EventType

    return _EventType.TorchOp


def light_events(prof: Any) -> tuple[list[Ev], list[Any]]:
    """(every op/range event, parents before children; the tree's roots)."""
    results = prof.profiler.kineto_results
    kineto = {e.correlation_id(): e for e in results.events() if e.correlation_id()}
    roots = list(results.experimental_event_tree())
    tag = op_tag()
    out: list[Ev] = []
    stack: list[tuple[Any, Ev | None]] = [(n, None) for n in reversed(roots)]
    while stack:
        node, parent = stack.pop()
        if node.tag != tag:
            continue  # allocations, Python frames: not events of the attribution
        ev = Ev(node, parent, kineto.get(node.correlation_id))
        if parent is not None:
            parent.cpu_children.append(ev)
        out.append(ev)
        stack.extend((c, ev) for c in reversed(node.children))
    return out, roots

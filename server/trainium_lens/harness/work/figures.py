"""The work step's profile → per-line work figures (per call) and the result's
``work`` and ``memory`` blocks.

Each op event gets its line and phase from the same attribution pass as time
(``attribution/tree.py``: backward ops land on the forward line that caused
them). Then, per op:

* FLOPs (``formulas.py``) of an op with a formula, unless an op around it has
  one (``scaled_dot_product_attention`` around its kernel);
* bytes, an estimate, of the ops a line dispatched itself (not nested in
  another op): the sizes of its tensor inputs (a broadcast dimension once) plus
  what it allocated and still held when it returned (its outputs), plus the
  input it wrote for an in-place op; views move nothing;
* the dtype of the line's FLOP-heaviest op (else its byte-heaviest): it picks the peak.

Recompute (``torch.utils.checkpoint``) counts with the backward: it runs inside it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trainium_lens.harness.attribution.kinds import BWD, OP, RECOMPUTE, REGION, classify
from trainium_lens.harness.attribution.tree import attribute
from trainium_lens.harness.work import formulas, memory
from trainium_lens.harness.work.events import light_events
from trainium_lens.harness.work.step import WorkProfile

SOURCE_NOTE = (
    "one extra labelled call after the timed steps, with input shapes and allocator events "
    "recorded; FLOPs: matmul, convolution and attention ops (torch.utils.flop_counter's "
    "formulas); bytes: an estimate (tensor inputs + outputs of the ops a line dispatched)"
)


@dataclass
class LineWork:
    flops: float = 0.0
    bytes: float = 0.0
    backward_flops: float = 0.0
    backward_bytes: float = 0.0
    alloc_bytes: float = 0.0
    by_dtype: dict[str, list[float]] = field(default_factory=dict)  # dtype -> [flops, bytes]

    def dtype(self) -> str | None:
        if not self.by_dtype:
            return None
        return max(self.by_dtype, key=lambda d: (self.by_dtype[d][0], self.by_dtype[d][1]))


def _dtype_name(dtype: Any) -> str:
    return str(dtype).replace("torch.", "")


def _tensor_bytes(meta: Any) -> int:
    """Bytes of a recorded tensor input; a broadcast (stride 0) dimension counts once."""
    sizes, strides = list(meta.sizes), list(meta.strides)
    n = 1
    for i, size in enumerate(sizes):
        if i >= len(strides) or strides[i] != 0:
            n *= size
    return n * getattr(meta.dtype, "itemsize", 0)


def _inputs(node: Any) -> tuple[int, int, str | None]:
    """(bytes of all tensor inputs, bytes of the first, dtype of the first floating one)."""
    total, first, dtype = 0, -1, None
    for value in node.extra_fields.inputs:
        for meta in value if isinstance(value, list) else [value]:
            if not hasattr(meta, "sizes") or not hasattr(meta, "dtype"):
                continue
            b = _tensor_bytes(meta)
            total += b
            if first < 0:
                first = b
            if dtype is None and getattr(meta.dtype, "is_floating_point", False):
                dtype = _dtype_name(meta.dtype)
    return total, max(first, 0), dtype


def _allocated(node: Any, is_allocation: Any) -> int:
    """Bytes allocated under ``node`` and not freed there (its outputs)."""
    total, stack = 0, list(node.children)
    while stack:
        n = stack.pop()
        if is_allocation(n):
            total += int(n.extra_fields.alloc_size)
        else:
            stack.extend(n.children)
    return max(total, 0)


def _is_allocation_fn() -> Any:
    from torch._C._profiler import _EventType

    allocation = _EventType.Allocation
    return lambda n: n.tag == allocation


def measure(wp: WorkProfile, labels: dict, def_label: str | None, device_type: str) -> dict:
    """``{"lines": {label: LineWork}, "saved": ..., "work": {...}, "memory": {...}}``."""
    events, roots = light_events(wp.prof)  # not prof.events(): events.py says why
    att = attribute(events, labels, False, def_label, None, record_events=True)
    lines_of = att.event_lines  # event id -> (label, phase)
    is_allocation = _is_allocation_fn()
    kinds: dict[str, int] = {}

    def kind(name: str) -> int:
        k = kinds.get(name)
        if k is None:
            k = kinds[name] = classify(name, labels)
        return k

    per_event: dict[int, int] = {}
    for e in events:
        if e.id in lines_of:
            f = (
                formulas.flops(e.name, e.input_shapes, e.concrete_inputs)
                if e.name in formulas.FORMULAS
                else 0
            )
            if f:
                per_event[e.id] = f
    lines: dict[Any, LineWork] = {}
    total_flops = total_bytes = unattributed = 0.0
    for e in events:
        where = lines_of.get(e.id)
        if where is None:
            continue
        key, phase = where
        backward = phase in (BWD, RECOMPUTE)
        f = per_event.get(e.id, 0)
        direct = True
        p = e.cpu_parent
        while p is not None:
            if f and p.id in per_event:
                f = 0  # an op around it counted these FLOPs
            if kind(p.name) == OP:
                direct = False
            p = p.cpu_parent
        b, alloc, dtype = 0, 0, None
        node = e.node
        if direct and node is not None and kind(e.name) != REGION:
            inputs, first, dtype = _inputs(node)
            alloc = _allocated(node, is_allocation)
            if formulas.in_place(e.name):
                b = inputs + first
            elif alloc:
                b = inputs + alloc  # no allocation and not in place: a view, nothing moved
        elif node is not None and f:
            dtype = _inputs(node)[2]
        if not f and not b:
            continue
        total_flops += f
        total_bytes += b
        if key is None:
            unattributed += f
            continue
        lw = lines.get(key)
        if lw is None:
            lw = lines[key] = LineWork()
        if backward:
            lw.backward_flops += f
            lw.backward_bytes += b
        else:
            lw.flops += f
            lw.bytes += b
            lw.alloc_bytes += alloc
        if dtype:
            row = lw.by_dtype.setdefault(dtype, [0.0, 0.0])
            row[0] += f
            row[1] += b

    def resolve(n: Any) -> memory.Owner | None:
        cid = getattr(n, "correlation_id", 0)
        where = lines_of.get(cid) if cid else None
        if where is not None:
            return where
        name = n.name
        return (name, 0) if name in labels else None

    mem = memory.walk(roots, resolve, wp.saved, device_type, is_allocation)
    return {
        "lines": lines,
        "memory": mem,
        "work": {
            "source": "shapes",
            "flops": total_flops,
            "bytes": total_bytes,
            "unattributed_flops": unattributed,
            "note": SOURCE_NOTE,
        },
    }

"""Work per line on torch-xla: FLOPs and bytes from the shapes of the executed HLO
instructions, memory from the compiled module's buffer assignment. Fed by the
line mapping (``xla/attribution.py``): each executed instruction's work goes to
the line its time goes to (a fusion: the whole fusion, as its time), times its
executions per step. Stdlib only: the protobuf fields are decoded by hand with
``protobuf.fields`` (field numbers of xla's ``hlo.proto`` / ``xla_data.proto``).

* FLOPs, as XLA's own cost analysis counts them: ``dot`` 2 × output elements ×
  contracted size; ``convolution`` 2 × output elements × kernel elements per
  output feature; a fusion, the dots and convolutions inside it; the rest 0.
* Bytes: output plus operands of each executed instruction (a fusion: its own
  operands and output, what it reads and writes in memory); parameters,
  constants, tuples and bitcasts move nothing.
* Memory: each line's instructions' output buffers (``alloc_bytes``), and the
  module's heap simulation (``BufferAssignmentProto.heap_simulator_traces``):
  its peak of live temporary buffers and the lines whose buffers are live there.

Backward instructions carry the backward tag of the forward line that caused
them (``xla/tags.py``, ``credit.py``): their work goes to that line's backward
figures, as their time does (an instruction with no tag keeps the line its own
metadata names, as forward work).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import prod
from typing import Any

from trainium_lens.harness.xla.credit import BACKWARD
from trainium_lens.harness.xla.hlo import HloInstr, HloModule
from trainium_lens.harness.xla.protobuf import fields, packed

# PrimitiveType (xla_data.proto) -> (torch dtype name, bytes per element)
ELEMENT = {
    1: ("bool", 1),
    2: ("int8", 1),
    3: ("int16", 2),
    4: ("int32", 4),
    5: ("int64", 8),
    6: ("uint8", 1),
    7: ("uint16", 2),
    8: ("uint32", 4),
    9: ("uint64", 8),
    10: ("float16", 2),
    11: ("float32", 4),
    12: ("float64", 8),
    15: ("complex64", 8),
    16: ("bfloat16", 2),
    18: ("complex128", 16),
    19: ("float8_e5m2", 1),
    20: ("float8_e4m3fn", 1),
}
NO_TRAFFIC = frozenset({"parameter", "constant", "tuple", "get-tuple-element", "bitcast", "after-all"})


@dataclass
class Shape:
    element: int = 0
    dims: list[int] = field(default_factory=list)
    tuple_shapes: list[Shape] = field(default_factory=list)

    @property
    def nbytes(self) -> int:
        if self.tuple_shapes:
            return sum(s.nbytes for s in self.tuple_shapes)
        return prod(self.dims) * ELEMENT.get(self.element, ("", 0))[1]

    @property
    def dtype(self) -> str | None:
        return ELEMENT.get(self.element, (None, 0))[0]


def parse_shape(buf: bytes) -> Shape:
    """A ``ShapeProto``: element_type 2, dimensions 3, tuple_shapes 4."""
    shape = Shape()
    for number, value in fields(buf):
        if number == 2 and isinstance(value, int):
            shape.element = value
        elif number == 3:
            shape.dims.extend(packed(value))
        elif number == 4 and isinstance(value, bytes):
            shape.tuple_shapes.append(parse_shape(value))
    return shape


class ModuleWork:
    """Shapes and FLOPs of one module's instructions (decoded on first use)."""

    def __init__(self, module: HloModule):
        self.module = module
        self.by_id = {ins.id: ins for instrs in module.computations.values() for ins in instrs}
        self._shapes: dict[int, Shape] = {}
        self._flops: dict[int, int] = {}

    def shape(self, ins: HloInstr) -> Shape:
        found = self._shapes.get(ins.id)
        if found is None:
            raw = next((v for n, v in fields(ins.raw) if n == 3 and isinstance(v, bytes)), b"")
            found = self._shapes[ins.id] = parse_shape(raw)
        return found

    def operand_shape(self, ins: HloInstr, i: int) -> Shape | None:
        if i >= len(ins.operands) or ins.operands[i] not in self.by_id:
            return None
        return self.shape(self.by_id[ins.operands[i]])

    def flops(self, ins: HloInstr) -> int:
        found = self._flops.get(ins.id)
        if found is None:
            found = self._flops[ins.id] = self._count(ins)
        return found

    def _count(self, ins: HloInstr) -> int:
        if ins.opcode == "dot":
            return self._dot(ins)
        if ins.opcode == "convolution":
            return self._convolution(ins)
        if ins.opcode in ("fusion", "call"):
            return sum(self.flops(inner) for c in ins.called for inner in self.module.computations.get(c, []))
        return 0

    def _dot(self, ins: HloInstr) -> int:
        """2 × output elements × the contracted dimensions' size (DotDimensionNumbers
        field 1: lhs_contracting_dimensions)."""
        lhs = self.operand_shape(ins, 0)
        if lhs is None:
            return 0
        dnums = next((v for n, v in fields(ins.raw) if n == 30 and isinstance(v, bytes)), b"")
        contracting = [d for n, v in fields(dnums) if n == 1 for d in packed(v)]
        k = prod(lhs.dims[d] for d in contracting if d < len(lhs.dims))
        return 2 * prod(self.shape(ins).dims) * k

    def _convolution(self, ins: HloInstr) -> int:
        """2 × output elements × kernel elements per output feature
        (ConvolutionDimensionNumbers field 4: kernel_output_feature_dimension)."""
        kernel = self.operand_shape(ins, 1)
        if kernel is None or not kernel.dims:
            return 0
        cdn = next((v for n, v in fields(ins.raw) if n == 16 and isinstance(v, bytes)), b"")
        out_feature = next((v for n, v in fields(cdn) if n == 4 and isinstance(v, int)), 0)
        per_output = prod(kernel.dims) // max(kernel.dims[out_feature], 1)
        return 2 * prod(self.shape(ins).dims) * per_output

    def traffic(self, ins: HloInstr) -> int:
        """Bytes an executed instruction reads and writes: its operands and output."""
        if ins.opcode in NO_TRAFFIC:
            return 0
        total = self.shape(ins).nbytes
        for i in range(len(ins.operands)):
            shape = self.operand_shape(ins, i)
            total += shape.nbytes if shape else 0
        return total


def _work_of(att: Any, modules: dict[str, ModuleWork]) -> tuple[dict, float, float, float]:
    n = max(att.steps, 1)
    per_place: dict[Any, dict] = {}
    total_flops = total_bytes = unattributed = 0.0
    for key, credit in att.credits.items():
        ins, mw = att.instrs.get(key), modules.get(key[0])
        if ins is None or mw is None:
            continue
        calls = att.calls.get(key, 0) / n
        f, b = mw.flops(ins) * calls, mw.traffic(ins) * calls
        total_flops, total_bytes = total_flops + f, total_bytes + b
        if not credit.stack:
            unattributed += f
            continue
        row = per_place.setdefault(
            credit.stack[0],
            {
                "flops": 0.0,
                "bytes": 0.0,
                "backward_flops": 0.0,
                "backward_bytes": 0.0,
                "alloc": 0.0,
                "dtypes": {},
            },
        )
        # the work goes to the phase its time goes to (figures.py): a backward dot's FLOPs
        # on the forward figure put the line's forward FLOP/s at ~3× what its time allows
        side = "backward_" if credit.phase == BACKWARD else ""
        row[side + "flops"] += f
        row[side + "bytes"] += b
        if ins.opcode not in NO_TRAFFIC:
            row["alloc"] += mw.shape(ins).nbytes * calls
        dtype = mw.shape(ins).dtype
        if dtype and (f or b):
            d = row["dtypes"].setdefault(dtype, [0.0, 0.0])
            d[0] += f
            d[1] += b
    return per_place, total_flops, total_bytes, unattributed


def _heap_peak(mw: ModuleWork, att: Any) -> tuple[int, dict, int]:
    """(peak bytes of live temporaries, place -> bytes live there, parameter bytes)
    from the module's heap simulator traces; each trace is one allocation, all live
    for the whole execution, so their peaks add up."""
    logical: dict[int, tuple[int, int]] = {}  # logical buffer id -> (size, defining instruction id)
    params, traces = 0, []
    for number, value in fields(mw.module.buffer_assignment):
        if number == 1 and isinstance(value, bytes):
            lb = dict.fromkeys((1, 2), 0)
            at = 0
            for n, v in fields(value):
                if n in (1, 2) and isinstance(v, int):
                    lb[n] = v
                elif n == 3 and isinstance(v, bytes):
                    at = next((x for k, x in fields(v) if k == 4 and isinstance(x, int)), 0)
            logical[lb[1]] = (lb[2], at)
        elif number == 3 and isinstance(value, bytes):
            alloc = {n: v for n, v in fields(value) if isinstance(v, int)}
            if alloc.get(5):  # is_entry_computation_parameter: inputs, held before the run
                params += alloc.get(2, 0)
        elif number == 4 and isinstance(value, bytes):
            traces.append([fields(v) for n, v in fields(value) if n == 1 and isinstance(v, bytes)])
    total = 0
    at_peak: dict[Any, int] = {}
    for events in traces:
        live: dict[int, int] = {}
        level = best = 0
        best_live: dict[int, int] = {}
        for ev in events:
            e = {n: v for n, v in ev if isinstance(v, int)}
            kind, buf = e.get(1, 0), e.get(2, 0)
            if kind == 0:  # ALLOC
                live[buf] = logical.get(buf, (0, 0))[0]
                level += live[buf]
                if level > best:
                    best, best_live = level, dict(live)
            elif kind == 1:  # FREE
                level -= live.pop(buf, 0)
        total += best
        for buf, size in best_live.items():
            ins = mw.by_id.get(logical.get(buf, (0, 0))[1])
            credit = att.credits.get((mw.module.name, ins.name)) if ins is not None else None
            place = credit.stack[0] if credit is not None and credit.stack else None
            at_peak[place] = at_peak.get(place, 0) + size
    return total, at_peak, params


def add_work(doc_lines: list[dict], att: Any, cap: Any) -> dict:
    """Fill each line's work and memory fields; return the result's ``work`` and ``memory``."""
    modules = {m.name: ModuleWork(m) for m in cap.modules.values()}
    per_place, total_flops, total_bytes, unattributed = _work_of(att, modules)
    executed = {key[0] for key in att.credits}
    best: tuple[int, dict, int] = (0, {}, 0)
    for name in sorted(executed):
        if name in modules and modules[name].module.buffer_assignment:
            found = _heap_peak(modules[name], att)
            if found[0] > best[0]:
                best = found
    peak, at_peak, params = best
    by_line = {(f, ln): b for (f, ln, _fn), b in ((p, b) for p, b in at_peak.items() if p)}
    for line in doc_lines:
        row = next((r for p, r in per_place.items() if (p[0], p[1]) == (line["file"], line["line"])), None)
        dtypes = row["dtypes"] if row else {}
        line.update(
            flops=row["flops"] if row else 0.0,
            bytes=row["bytes"] if row else 0.0,
            backward_flops=row["backward_flops"] if row else 0.0,
            backward_bytes=row["backward_bytes"] if row else 0.0,
            dtype=max(dtypes, key=lambda d: (dtypes[d][0], dtypes[d][1])) if dtypes else None,
            alloc_bytes=row["alloc"] if row else 0.0,
            peak_bytes=float(by_line.get((line["file"], line["line"]), 0)),
        )
    work = {
        "source": "hlo",
        "flops": total_flops,
        "bytes": total_bytes,
        "unattributed_flops": unattributed,
        "note": (
            "executed HLO instructions' shapes: dot and convolution FLOPs as XLA's cost analysis "
            "counts them; bytes: operands + output of each executed instruction (a fusion's own)"
        ),
    }
    memory = {
        "device": "xla",
        "available": bool(peak),
        "peak_bytes": float(peak),
        "peak_phase": "",
        "unattributed_peak_bytes": float(at_peak.get(None, 0)),
        "held_before_bytes": float(params),
        "source": "the compiled module's buffer assignment (heap simulation of its temporaries)",
        "note": None if peak else "the compiled module carries no buffer assignment: not available",
    }
    return {"work": work, "memory": memory}

"""Read what torch_xla's profiler wrote, with the standard library only.

``torch_xla.debug.profiler.stop_trace()`` exports ``<log_dir>/plugins/profile/
<run>/<host>.xplane.pb`` (an ``XSpace`` protobuf). It holds both halves of the
join the xla backend needs (docs/xla.md, "Time per HLO instruction"):

* on the ``/host:CPU`` plane, one event per executed HLO instruction or fusion,
  with stats ``hlo_op`` (the optimized instruction's name), ``hlo_module`` and
  ``program_id``;
* on the ``/host:metadata`` plane, one event metadata per compiled program,
  keyed by program id, whose stat ``hlo_proto`` is the **optimized** ``HloProto``
  (fusion names are the ones that ran), with the stack-frame index.

No protobuf library is available on a target (the harness needs torch and
torch_xla only), so this decodes the wire format for the few fields it reads;
field numbers are those of tsl's ``xplane.proto`` and xla's ``hlo.proto`` /
``xla_data.proto`` (``OpMetadata.stack_frame_id`` = 15).
"""

from __future__ import annotations

import glob
import os
import struct
from dataclasses import dataclass, field

# -- protobuf wire format -------------------------------------------------------------


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        byte = buf[i]
        i += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, i
        shift += 7


def fields(buf: bytes) -> list[tuple[int, int | bytes]]:
    """[(field number, int or bytes)] of one message, in order (repeats kept)."""
    out: list[tuple[int, int | bytes]] = []
    i, n = 0, len(buf)
    while i < n:
        key, i = _varint(buf, i)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == 0:
            value, i = _varint(buf, i)
        elif wire == 2:
            size, i = _varint(buf, i)
            value = buf[i : i + size]
            i += size
        elif wire == 1:
            value = int.from_bytes(buf[i : i + 8], "little")
            i += 8
        elif wire == 5:
            value = int.from_bytes(buf[i : i + 4], "little")
            i += 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        out.append((number, value))
    return out


def _signed(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def _packed(value: int | bytes) -> list[int]:
    if isinstance(value, int):
        return [value]
    out, i = [], 0
    while i < len(value):
        v, i = _varint(value, i)
        out.append(v)
    return out


def _str(value: int | bytes) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


# -- HLO ----------------------------------------------------------------------------------


@dataclass
class HloInstr:
    name: str
    opcode: str
    id: int = 0
    op_type: str = ""
    op_name: str = ""
    source_file: str = ""
    source_line: int = 0
    stack_frame_id: int = 0
    called: list[int] = field(default_factory=list)  # computation ids (a fusion's body)
    operands: list[int] = field(default_factory=list)  # instruction ids
    parameter_number: int = 0
    raw: bytes = b""  # the HloInstructionProto (shapes, dimension numbers: xla/work.py)


@dataclass
class HloModule:
    name: str
    computations: dict[int, list[HloInstr]] = field(default_factory=dict)
    roots: dict[int, int] = field(default_factory=dict)  # computation id -> root instruction id
    file_names: list[str] = field(default_factory=list)
    function_names: list[str] = field(default_factory=list)
    file_locations: list[tuple[int, int, int]] = field(default_factory=list)  # file, function, line
    stack_frames: list[tuple[int, int]] = field(default_factory=list)  # location, parent
    buffer_assignment: bytes = b""  # the HloProto's BufferAssignmentProto (xla/work.py)
    _users: dict[int, list[HloInstr]] | None = field(default=None, repr=False)
    _by_name: dict[str, HloInstr] | None = field(default=None, repr=False)
    _by_id: dict[int, HloInstr] | None = field(default=None, repr=False)
    _comp_of: dict[int, int] | None = field(default=None, repr=False)
    _callers: dict[int, list[HloInstr]] | None = field(default=None, repr=False)

    def users(self, instr_id: int) -> list[HloInstr]:
        """Instructions that read ``instr_id`` (the index is built on first use)."""
        if self._users is None:
            self._users = {}
            for instrs in self.computations.values():
                for ins in instrs:
                    for op in ins.operands:
                        self._users.setdefault(op, []).append(ins)
        return self._users.get(instr_id, [])

    def by_id(self, instr_id: int) -> HloInstr | None:
        if self._by_id is None:
            self._by_id = {ins.id: ins for instrs in self.computations.values() for ins in instrs}
        return self._by_id.get(instr_id)

    def callers(self, comp_id: int) -> list[HloInstr]:
        """Instructions that call computation ``comp_id`` (a fusion's body, a
        ``call``'s target, a reducer...)."""
        if self._callers is None:
            self._callers = {}
            for instrs in self.computations.values():
                for ins in instrs:
                    for called in ins.called:
                        self._callers.setdefault(called, []).append(ins)
        return self._callers.get(comp_id, [])

    def computation_of(self, instr_id: int) -> int | None:
        """The id of the computation holding instruction ``instr_id``."""
        if self._comp_of is None:
            self._comp_of = {ins.id: c for c, instrs in self.computations.items() for ins in instrs}
        return self._comp_of.get(instr_id)

    def instruction(self, name: str) -> HloInstr | None:
        """The instruction named ``name`` (the index is built on first use)."""
        if self._by_name is None:
            self._by_name = {}
            for instrs in self.computations.values():
                for ins in instrs:
                    self._by_name.setdefault(ins.name, ins)
        return self._by_name.get(name)


def _metadata(ins: HloInstr, buf: bytes) -> None:
    for number, value in fields(buf):
        if number == 1:
            ins.op_type = _str(value)
        elif number == 2:
            ins.op_name = _str(value)
        elif number == 3:
            ins.source_file = _str(value)
        elif number == 4 and isinstance(value, int):
            ins.source_line = _signed(value)
        elif number == 15 and isinstance(value, int):
            ins.stack_frame_id = value


def _instruction(buf: bytes) -> HloInstr:
    ins = HloInstr("", "", raw=buf)
    for number, value in fields(buf):
        if number == 1:
            ins.name = _str(value)
        elif number == 2:
            ins.opcode = _str(value)
        elif number == 7 and isinstance(value, bytes):
            _metadata(ins, value)
        elif number == 35 and isinstance(value, int):
            ins.id = value
        elif number == 36:
            ins.operands.extend(_packed(value))
        elif number == 9 and isinstance(value, int):
            ins.parameter_number = value
        elif number == 38:
            ins.called.extend(_packed(value))
    return ins


def _stack_index(module: HloModule, buf: bytes) -> None:
    for number, value in fields(buf):
        if number == 1:
            module.file_names.append(_str(value))
        elif number == 2:
            module.function_names.append(_str(value))
        elif number == 3 and isinstance(value, bytes):
            loc = dict.fromkeys((1, 2, 3), 0)
            loc.update((k, v) for k, v in fields(value) if isinstance(v, int))
            module.file_locations.append((loc[1], loc[2], loc[3]))
        elif number == 4 and isinstance(value, bytes):
            frame = dict.fromkeys((1, 2), 0)
            frame.update((k, v) for k, v in fields(value) if isinstance(v, int))
            module.stack_frames.append((frame[1], frame[2]))


def parse_hlo_module(buf: bytes) -> HloModule:
    """An ``HloModuleProto``."""
    module = HloModule("")
    for number, value in fields(buf):
        if number == 1:
            module.name = _str(value)
        elif number == 3 and isinstance(value, bytes):
            comp_id, root, instrs = 0, 0, []
            for n, v in fields(value):
                if n == 2 and isinstance(v, bytes):
                    instrs.append(_instruction(v))
                elif n == 5 and isinstance(v, int):
                    comp_id = v
                elif n == 6 and isinstance(v, int):
                    root = v
            module.computations[comp_id] = instrs
            module.roots[comp_id] = root
        elif number == 17 and isinstance(value, bytes):
            _stack_index(module, value)
    return module


def parse_hlo_proto(buf: bytes) -> HloModule:
    """An ``HloProto`` (field 1: the module; 3: its buffer assignment, kept raw)."""
    parts = fields(buf)
    for number, value in parts:
        if number == 1 and isinstance(value, bytes):
            module = parse_hlo_module(value)
            module.buffer_assignment = next((v for n, v in parts if n == 3 and isinstance(v, bytes)), b"")
            return module
    raise ValueError("HloProto without a module")


# -- XSpace ----------------------------------------------------------------------------


@dataclass
class Executed:
    """One executed HLO instruction (or fusion) on the host CPU clock."""

    start_ns: float
    end_ns: float
    hlo_op: str
    hlo_module: str
    program_id: int | None
    thread: str


@dataclass
class Capture:
    executed: list[Executed] = field(default_factory=list)
    modules: dict[int, HloModule] = field(default_factory=dict)  # program id -> optimized HLO
    markers: list[tuple[str, float, float]] = field(default_factory=list)  # (name, start, end) ns
    path: str = ""


def _stat_value(buf: bytes, names: dict[int, str]) -> tuple[int, int | float | str | bytes | None]:
    """(stat metadata id, value); a ``ref_value`` (7) is an interned string: a stat
    metadata id whose name is the value."""
    mid = 0
    value: int | float | str | bytes | None = None
    for number, v in fields(buf):
        if number == 1 and isinstance(v, int):
            mid = v
        elif number == 3 and isinstance(v, int):
            value = v
        elif number == 7 and isinstance(v, int):
            value = names.get(v, "")
        elif number == 4 and isinstance(v, int):
            value = _signed(v)
        elif number == 2 and isinstance(v, int):
            value = struct.unpack("<d", v.to_bytes(8, "little"))[0]
        elif number == 5:
            value = _str(v)
        elif number == 6:
            value = v
    return mid, value


def _map_entries(buf: bytes) -> tuple[int, bytes]:
    key, val = 0, b""
    for number, v in fields(buf):
        if number == 1 and isinstance(v, int):
            key = v
        elif number == 2 and isinstance(v, bytes):
            val = v
    return key, val


def _named(buf: bytes) -> tuple[int, str, list[bytes]]:
    ident, name, stats = 0, "", []
    for number, v in fields(buf):
        if number == 1 and isinstance(v, int):
            ident = v
        elif number == 2:
            name = _str(v)
        elif number == 5 and isinstance(v, bytes):
            stats.append(v)
    return ident, name, stats


def read_xspace(path: str, marker_prefix: str) -> Capture:
    with open(path, "rb") as fh:
        space = fh.read()
    cap = Capture(path=path)
    for number, plane in fields(space):
        if number != 1 or not isinstance(plane, bytes):
            continue
        _read_plane(plane, cap, marker_prefix)
    return cap


def _read_plane(plane: bytes, cap: Capture, marker_prefix: str) -> None:
    parts = fields(plane)
    name = next((_str(v) for n, v in parts if n == 2), "")
    if name not in ("/host:CPU", "/host:metadata"):
        return
    stat_names: dict[int, str] = {}
    event_meta: dict[int, tuple[str, list[bytes]]] = {}
    for n, v in parts:
        if n == 5 and isinstance(v, bytes):
            key, val = _map_entries(v)
            stat_names[key] = _named(val)[1]
        elif n == 4 and isinstance(v, bytes):
            key, val = _map_entries(v)
            _ident, ev_name, stats = _named(val)
            event_meta[key] = (ev_name, stats)
    if name == "/host:metadata":
        for key, (_ev_name, stats) in event_meta.items():
            for raw in stats:
                mid, value = _stat_value(raw, stat_names)
                if stat_names.get(mid) in ("hlo_proto", "Hlo Proto") and isinstance(value, bytes):
                    cap.modules[key] = parse_hlo_proto(value)
        return
    for n, line in parts:
        if n != 3 or not isinstance(line, bytes):
            continue
        _read_line(line, cap, stat_names, event_meta, marker_prefix)


def _read_line(
    line: bytes,
    cap: Capture,
    stat_names: dict[int, str],
    event_meta: dict[int, tuple[str, list[bytes]]],
    marker_prefix: str,
) -> None:
    base_ns, thread, events = 0, "", []
    decoded: dict[int, dict[str, object]] = {}
    for n, v in fields(line):
        if n == 3 and isinstance(v, int):
            base_ns = _signed(v)
        elif n == 2:
            thread = _str(v)
        elif n == 4 and isinstance(v, bytes):
            events.append(v)
    for raw in events:
        mid = offset_ps = duration_ps = 0
        stats: dict[str, object] = {}
        for n, v in fields(raw):
            if n == 1 and isinstance(v, int):
                mid = v
            elif n == 2 and isinstance(v, int):
                offset_ps = v
            elif n == 3 and isinstance(v, int):
                duration_ps = v
            elif n == 4 and isinstance(v, bytes):
                sid, value = _stat_value(v, stat_names)
                stats[stat_names.get(sid, "")] = value
        ev_name, meta_stats = event_meta.get(mid, ("", []))
        shared = decoded.get(mid)
        if shared is None:  # stats stored once on the event's metadata, decoded once
            shared = decoded[mid] = {}
            for raw_stat in meta_stats:
                sid, value = _stat_value(raw_stat, stat_names)
                shared[stat_names.get(sid, "")] = value
        for k, shared_value in shared.items():
            stats.setdefault(k, shared_value)
        start = base_ns + offset_ps / 1000.0
        end = start + duration_ps / 1000.0
        if "hlo_op" in stats:
            pid = stats.get("program_id")
            cap.executed.append(
                Executed(
                    start,
                    end,
                    str(stats["hlo_op"]),
                    str(stats.get("hlo_module", "")),
                    pid if isinstance(pid, int) else None,
                    thread,
                )
            )
        elif ev_name.startswith(marker_prefix):
            cap.markers.append((ev_name, start, end))


def find_xplanes(log_dir: str) -> list[str]:
    return sorted(glob.glob(os.path.join(log_dir, "plugins", "profile", "*", "*.xplane.pb")))

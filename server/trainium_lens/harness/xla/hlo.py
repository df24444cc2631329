"""The optimized HLO of a program, decoded from its HloProto: instructions, their
metadata (source frames, op names) and the stack-frame index."""

from __future__ import annotations

from dataclasses import dataclass, field

from trainium_lens.harness.xla.protobuf import fields, packed, signed, text


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
            ins.op_type = text(value)
        elif number == 2:
            ins.op_name = text(value)
        elif number == 3:
            ins.source_file = text(value)
        elif number == 4 and isinstance(value, int):
            ins.source_line = signed(value)
        elif number == 15 and isinstance(value, int):
            ins.stack_frame_id = value


def _instruction(buf: bytes) -> HloInstr:
    ins = HloInstr("", "", raw=buf)
    for number, value in fields(buf):
        if number == 1:
            ins.name = text(value)
        elif number == 2:
            ins.opcode = text(value)
        elif number == 7 and isinstance(value, bytes):
            _metadata(ins, value)
        elif number == 35 and isinstance(value, int):
            ins.id = value
        elif number == 36:
            ins.operands.extend(packed(value))
        elif number == 9 and isinstance(value, int):
            ins.parameter_number = value
        elif number == 38:
            ins.called.extend(packed(value))
    return ins


def _stack_index(module: HloModule, buf: bytes) -> None:
    for number, value in fields(buf):
        if number == 1:
            module.file_names.append(text(value))
        elif number == 2:
            module.function_names.append(text(value))
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
            module.name = text(value)
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

"""A tiny protobuf encoder for hand-built HLO modules and stack-frame indexes
(the xla reader's unit tests build their fixtures with it; field numbers are
xla's hlo.proto / xla_data.proto, as harness/xla/xplane.py decodes them)."""

from __future__ import annotations

from collections.abc import Iterable


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def f_int(number: int, value: int) -> bytes:
    return varint(number << 3) + varint(value)


def f_bytes(number: int, value: bytes | str) -> bytes:
    data = value.encode() if isinstance(value, str) else value
    return varint(number << 3 | 2) + varint(len(data)) + data


def instr(
    name: str,
    opcode: str,
    ident: int,
    frame: int = 0,
    called: Iterable[int] = (),
    operands: Iterable[int] = (),
    param: int | None = None,
    op_type: str = "",
    op_name: str = "",
) -> bytes:
    """An ``HloInstructionProto``: metadata (op_type 1, op_name 2, stack_frame_id 15),
    id 35, operand ids 36, called computation ids 38, parameter_number 9."""
    meta = (
        f_bytes(1, op_type) + (f_bytes(2, op_name) if op_name else b"") + (f_int(15, frame) if frame else b"")
    )
    out = f_bytes(1, name) + f_bytes(2, opcode) + f_bytes(7, meta) + f_int(35, ident)
    out += b"".join(f_int(38, c) for c in called) + b"".join(f_int(36, o) for o in operands)
    if param is not None:
        out += f_int(9, param)
    return out


def computation(comp_id: int, root: int, *instrs: bytes) -> bytes:
    return b"".join(f_bytes(2, i) for i in instrs) + f_int(5, comp_id) + f_int(6, root)


def stack_index(
    files: list[str],
    functions: list[str],
    locations: Iterable[tuple[int, int, int]],
    frames: Iterable[tuple[int, int]],
) -> bytes:
    """``locations``: (file id, function id, line), ``frames``: (location id, parent id); 1-based."""
    out = b"".join(f_bytes(1, f) for f in files) + b"".join(f_bytes(2, f) for f in functions)
    out += b"".join(f_bytes(3, f_int(1, a) + f_int(2, b) + f_int(3, c)) for a, b, c in locations)
    out += b"".join(
        f_bytes(4, f_int(1, loc) + (f_int(2, parent) if parent else b"")) for loc, parent in frames
    )
    return out


def hlo_proto(name: str, computations: list[bytes], index: bytes) -> bytes:
    """An ``HloProto`` holding one module (computations in order, the entry last)."""
    module = f_bytes(1, name) + b"".join(f_bytes(3, c) for c in computations) + f_bytes(17, index)
    return f_bytes(1, module)

"""The protobuf wire format, by hand (stdlib only: the harness runs alone on a
target): varints, length-delimited fields, packed repeats. The xplane and HLO
readers build on it."""

from __future__ import annotations


def varint(buf: bytes, i: int) -> tuple[int, int]:
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
        key, i = varint(buf, i)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == 0:
            value, i = varint(buf, i)
        elif wire == 2:
            size, i = varint(buf, i)
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


def signed(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def packed(value: int | bytes) -> list[int]:
    if isinstance(value, int):
        return [value]
    out, i = [], 0
    while i < len(value):
        v, i = varint(value, i)
        out.append(v)
    return out


def text(value: int | bytes) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)

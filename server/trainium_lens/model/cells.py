"""The name a result gives a notebook cell, computed from the cell's text alone, so
the kernel that ran it and an editor that shows it agree (docs/notebooks.md, "How a
cell's lines are found").

ipykernel compiles a cell under ``<tempdir>/ipykernel_<pid>/<murmur2_x86(raw cell,
0xC70F6907)>.py``; results keep the last part under ``CELL_FOLDER`` (the temporary
folder changes with every kernel, the hash only with the text).
"""

from __future__ import annotations

#: The folder results name cells in: ``ipykernel-cell/<hash>.py``.
CELL_FOLDER = "ipykernel-cell"
#: ipykernel's seed for a cell's file name (its ``get_tmp_hash_seed``).
SEED = 0xC70F6907
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2_x86(text: str, seed: int = SEED) -> int:
    """MurmurHash2 (32-bit) of ``text``'s UTF-8 bytes, as ipykernel computes it."""
    data = text.encode("utf-8")
    length = len(data)
    h = seed ^ length
    end = length & ~3
    for i in range(0, end, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = (h * _M) & _MASK
        h ^= k
    tail = data[end:]
    if tail:
        h ^= int.from_bytes(tail, "little")
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h


def cell_file(text: str) -> str:
    """The name results give the cell whose raw text is ``text``."""
    return f"{CELL_FOLDER}/{murmur2_x86(text)}.py"


def is_cell_file(file: str) -> bool:
    return file.startswith(CELL_FOLDER + "/")

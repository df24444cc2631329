"""Work figures as text, shared by the editor and the CLI: FLOPs and bytes in
SI / binary units with three significant digits."""

from __future__ import annotations

_SI = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))
_BIN = ((1 << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB"))


def _sig(value: float) -> str:
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}".rstrip("0").rstrip(".")
    return f"{value:.2f}".rstrip("0").rstrip(".")


def si(value: float, unit: str) -> str:
    """``12.6 MFLOP``, ``190 GFLOP/s``, ``18.4 GB/s``."""
    for scale, prefix in _SI:
        if abs(value) >= scale:
            return f"{_sig(value / scale)} {prefix}{unit}"
    return f"{_sig(value)} {unit}"


def flops(value: float) -> str:
    return si(value, "FLOP")


def flops_rate(value: float) -> str:
    return si(value, "FLOP/s")


def bandwidth(value: float) -> str:
    return si(value, "B/s")


def nbytes(value: float) -> str:
    """``4 MiB``, ``192 KiB``, ``12 B``."""
    for scale, unit in _BIN:
        if abs(value) >= scale:
            return f"{_sig(value / scale)} {unit}"
    return f"{value:.0f} B"


def pct(value: float) -> str:
    """``41%``, ``<1%``, ``0%``."""
    if value == 0:
        return "0%"
    return f"{value:.0f}%" if value >= 1 else "<1%"

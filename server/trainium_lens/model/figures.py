"""How every figure reads, wherever it is shown: findings, hovers, inlay hints,
code lenses, the CLI and the results panel (through ``shown``, below). One rule
per kind of figure, so a time reads the same in a hover and in a table:

- **numbers**: three significant figures, trailing zeros dropped, never an
  exponent (``2.5``, ``12.3``, ``403``; ``12345`` above a thousand in the top unit);
- **times** (given in µs): ``ns`` below 1 µs, ``µs`` below 1000 µs, ``ms`` below
  1000 ms, ``s`` above; a figure that rounds up to the next unit takes it
  (999.7 µs reads ``1 ms``): ``4 ns``, ``2.5 µs``, ``1.16 ms``, ``2.4 s``, ``0 µs``;
- **bytes**: binary units (``12 B``, ``192 KiB``, ``4 MiB``), whole bytes below 1 KiB;
- **work and rates**: SI prefixes (``12.6 MFLOP``, ``190 GFLOP/s``, ``18.4 GB/s``);
- **percentages** (given in percent): whole from 10 % (``41%``), one decimal
  below (``4.2%``, ``0.4%``), ``<0.1%`` for a sliver, ``0%`` for nothing;
- **counts** (per-step averages): whole numbers as they are (``12``), others
  with three significant figures (``2.33``);
- **ratios**: three significant figures and ``×`` (``1.25×``);
- a missing figure (None, NaN) reads ``–``.

``tests/data/figure_samples.json`` holds sample values with their text per kind:
the Python tests and the extension's unit tests both assert it, so the panel's
few figures computed in TypeScript (``extension/src/panel/figures.ts``: a share of
a total the client sums, axis ticks) and the timeline's (``extension/media/timeline/
model.js``: event durations drawn in the browser) read as the server's.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from decimal import ROUND_HALF_UP, Decimal, localcontext
from typing import Any

MISSING = "–"

_TIME_UNITS = ((1e6, "s"), (1e3, "ms"), (1.0, "µs"), (1e-3, "ns"))
_SI = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))
_BIN = ((1 << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB"))


def _missing(value: float | None) -> bool:
    return value is None or not math.isfinite(value)


def _fixed(value: float, decimals: int) -> str:
    """``value`` with ``decimals`` decimals, a tie rounded up (as JavaScript's ``toFixed``
    does on the same double, so the panel's few figures agree to the digit)."""
    # format "f": never an exponent (str() of a Decimal under 1e-6 writes ``2.49E-11``)
    return format(Decimal(value).quantize(Decimal(1).scaleb(-decimals), rounding=ROUND_HALF_UP), "f")


def _round3(value: float) -> float:
    """``value`` (≥ 0) rounded to three significant figures (``toPrecision(3)``)."""
    with localcontext() as ctx:
        ctx.prec, ctx.rounding = 3, ROUND_HALF_UP
        return float(+Decimal(value))


def _strip(text: str) -> str:
    return text.rstrip("0").rstrip(".") if "." in text else text


def number(value: float) -> str:
    """``2.5``, ``12.3``, ``403``, ``0.0123``, ``12345``: three significant figures,
    no exponent, whole above a thousand."""
    if value < 0:
        return "-" + number(-value)
    r = _round3(value)
    if r == 0:
        return "0"
    if r >= 1000:
        return _fixed(value, 0)
    if r >= 100:
        return _fixed(r, 0)
    exponent = int(f"{r:.2e}".split("e")[1])
    return _strip(_fixed(r, 2 - exponent))


#: Below a picosecond a time is the float residue of a subtraction (the calibration's, the
#: host time's bound by the wall), far under any clock's resolution: it reads as zero
#: (a line's host time once read ``2.49E-11 ns``). ``is_zero_time`` is the one test for it.
ZERO_US = 1e-6


def is_zero_time(us: float | None) -> bool:
    """Nothing to show: no time, or a residue that ``time_us`` writes ``0 µs``."""
    return us is None or not math.isfinite(us) or abs(us) < ZERO_US


def time_us(us: float | None) -> str:
    """A time given in µs: ``4 ns``, ``2.5 µs``, ``1.16 ms``, ``2.4 s``, ``0 µs``."""
    if _missing(us):
        return MISSING
    assert us is not None
    if abs(us) < ZERO_US:
        return "0 µs"
    if us < 0:
        return "-" + time_us(-us)
    for scale, unit in _TIME_UNITS[:-1]:
        if _round3(us / scale) >= 1:
            return f"{number(us / scale)} {unit}"
    return f"{number(us * 1000)} ns"


def _prefixed(value: float | None, units: tuple[tuple[float, str], ...], unit: str, small: str) -> str:
    """``value`` in the largest of ``units`` (scale, name) it reaches once rounded,
    else in ``unit`` (``small`` formats that one); the sign kept in front."""
    if _missing(value):
        return MISSING
    assert value is not None
    sign = "-" if value < 0 else ""
    v = abs(value)
    for scale, name in units:
        if _round3(v / scale) >= 1:
            return f"{sign}{number(v / scale)} {name}"
    return f"{sign}{small} {unit}" if small else f"{sign}{number(v)} {unit}"


def si(value: float | None, unit: str) -> str:
    """``12.6 MFLOP``, ``190 GFLOP/s``, ``18.4 GB/s``, ``950 FLOP``."""
    return _prefixed(value, tuple((scale, prefix + unit) for scale, prefix in _SI), unit, "")


def flops(value: float | None) -> str:
    return si(value, "FLOP")


def flops_rate(value: float | None) -> str:
    return si(value, "FLOP/s")


def bandwidth(value: float | None) -> str:
    return si(value, "B/s")


def nbytes(value: float | None) -> str:
    """``12 B``, ``192 KiB``, ``4 MiB``, ``1.5 GiB``: whole bytes below 1 KiB."""
    whole = _fixed(abs(value), 0) if value is not None and math.isfinite(value) else ""
    return _prefixed(value, _BIN, "B", whole)


def pct(value: float | None) -> str:
    """A percentage given in percent: ``41%``, ``4.2%``, ``0.4%``, ``<0.1%``, ``0%``."""
    if _missing(value):
        return MISSING
    assert value is not None
    if value < 0:
        return "-" + pct(-value)
    if value == 0:
        return "0%"
    if value < 0.05:
        return "<0.1%"
    if float(_fixed(value, 1)) >= 10:
        return _fixed(value, 0) + "%"
    return _strip(_fixed(value, 1)) + "%"


def share(part: float, whole: float) -> str:
    """``part`` as a percentage of ``whole``; ``–`` for an empty whole."""
    return pct(100 * part / whole) if whole > 0 else MISSING


def count(value: float | None) -> str:
    """``12``, ``2.33``: per-step counts are averages, whole ones print whole."""
    if _missing(value):
        return MISSING
    assert value is not None
    if abs(value - round(value)) < 1e-6:
        return str(int(round(value)))
    return number(value)


def plural(value: float, word: str, words: str | None = None) -> str:
    """``1 step``, ``2 steps``, ``2.33 dispatches``: a count (``count``) and its noun,
    singular for exactly one (every surface: "after 1 steps" read in an error)."""
    return f"{count(value)} {word if abs(value - 1) < 1e-6 else (words or word + 's')}"


def ratio(value: float | None) -> str:
    """``1.25×``, ``0.88×``."""
    if _missing(value):
        return MISSING
    assert value is not None
    return f"{number(value)}×"


# -- the panel's figures ----------------------------------------------------------
# The results panel shows the server's text: ``shown`` adds to every object of its
# payload a ``shown`` map (field name → text) for the numeric fields a kind is
# known for, by the field's name (the result document's names).

FieldKind = Callable[[float], str]


def _kind(key: str) -> FieldKind | None:
    if key.endswith("flops_per_s"):
        return flops_rate
    if key.endswith("bytes_per_s"):
        return bandwidth
    if key.endswith("_us") or "_us_" in key:
        return time_us
    if key == "bytes" or key.endswith("_bytes"):
        return nbytes
    if key == "flops" or key.endswith("_flops"):
        return flops
    if key.startswith("pct") or key.endswith("_pct"):
        return pct
    if key in ("calls", "dispatches", "steps"):
        return count
    if key in ("ratio", "speedup") or key.endswith("_ratio"):
        return ratio
    return None


def shown(payload: Any) -> Any:
    """``payload`` (JSON: dicts, lists, scalars) with a ``shown`` map beside the
    figures of each object. The input is left as it is."""
    if isinstance(payload, list):
        return [shown(item) for item in payload]
    if not isinstance(payload, dict):
        return payload
    out = {key: shown(value) for key, value in payload.items()}
    texts = {}
    for key, value in payload.items():
        kind = _kind(key)
        if kind is not None and isinstance(value, int | float) and not isinstance(value, bool):
            texts[key] = kind(value)
    if texts:
        out["shown"] = texts
    return out

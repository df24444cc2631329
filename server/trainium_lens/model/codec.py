"""Plain JSON → typed dataclasses, checked: the result document's codec.

One converter per type, built once: a stored result with thousands of lines is
re-opened by the editor on every start, so validation must cost little more
than the JSON parse. The path of a bad value is assembled only on error. It
knows no result type: ``model/result.py`` names the types and the schema.
"""

from __future__ import annotations

import math
import re
from dataclasses import MISSING, fields, is_dataclass
from typing import Any, get_args, get_origin, get_type_hints


class ResultError(ValueError):
    """A result file that cannot be used; the message says why in one line."""


#: The largest magnitude a stored number may have: far above any time (µs), count, byte
#: or FLOP figure a run can hold, far enough below the float range that sums, products
#: and the formatting of figures never overflow (1e308 would: a traceback in ``show``).
MAX_NUMBER = 1e24

# The fields that hold a duration or a count (by name: ``self_time_us``, ``step_us``,
# ``calls``, ``peak_bytes``...): never negative. A clock offset, a trace instant or a
# calibration's difference may be; their names do not match.
_MEASURE = re.compile(
    r"(?:.*_)?(?:time_us|cpu_us|wall_us|step_us|span_us|wait_us|collective_us|dur_us"
    r"|calls|direct_calls|steps|dispatches|bytes|flops)(?:_min|_max|_median)?"
)


def refuse_constant(name: str) -> float:
    """``json.loads(..., parse_constant=refuse_constant)``: Python's parser reads
    ``NaN``, ``Infinity`` and ``-Infinity`` (not JSON) unless told otherwise."""
    raise ResultError(f"{name} is not a number a result can hold (not JSON)")


class _Bad(Exception):
    def __init__(self, message: str, path: str = ""):
        self.message, self.path = message, path

    def under(self, step: str) -> _Bad:
        self.path = step + self.path
        return self


# Line breaks and other control characters (tab aside), and the bidi controls that
# reorder how text shows (a line that reads differently from what it holds).
_UNSAFE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r"}


def one_line(text: str) -> str:
    """``text`` as one line of plain text: every string a result holds is data a
    repository can write, and reaches terminals, CI logs (where a line starting
    ``::`` is a workflow command), JUnit XML and hovers. Line breaks, control and
    bidi characters are shown escaped (``\\n``, ``\\x1b``, ``\\u202e``)."""
    if not _UNSAFE.search(text):
        return text
    return _UNSAFE.sub(lambda m: _NAMED.get(m.group(), f"\\u{ord(m.group()):04x}"), text)


_UNSAFE_KEEPING_LINES = re.compile(  # as _UNSAFE, but \n kept (and \t, as there)
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
)


def visible(text: str) -> str:
    """``text`` with its line breaks kept but control and bidi characters shown
    escaped: for messages whose words come from the user's code or host (an
    exception's text, a host's answer) on their way to an editor's notification
    or diagnostic, where a bidi override would make them read differently."""
    if not _UNSAFE_KEEPING_LINES.search(text):
        return text
    return _UNSAFE_KEEPING_LINES.sub(lambda m: _NAMED.get(m.group(), f"\\u{ord(m.group()):04x}"), text)


def build(tp: Any, value: Any, where: str) -> Any:
    """``value`` (plain JSON) as an instance of ``tp`` (a dataclass, list, dict, union, ...),
    every field's type checked; a ``ResultError`` naming the bad value's path otherwise."""
    try:
        return _converter(tp)(value)
    except _Bad as bad:
        raise ResultError(f"{where}{bad.path}: {bad.message}") from None


_CONVERTERS: dict[Any, Any] = {}


def _converter(tp: Any) -> Any:
    conv = _CONVERTERS.get(tp)
    if conv is None:
        conv = _CONVERTERS[tp] = _make_converter(tp)
    return conv


def _check_str(value: Any) -> str:
    if type(value) is not str:
        raise _Bad(f"expected a string, {_got(value)}")
    return value


def _got(value: Any) -> str:
    return f"got {value!r:.40}"


def _figure(value: float | int) -> str:
    """A number as a message shows it (an int of 4,000 digits would not fit a line)."""
    if isinstance(value, int) and abs(value) > MAX_NUMBER:
        return f"an integer of about {int(value.bit_length() * 0.30103) + 1} digits"
    return repr(value) if math.isfinite(value) else str(value)


def _non_negative(conv: Any) -> Any:
    """``conv``, refusing a negative number (or one in a list): a duration or a count."""

    def conv_measure(value: Any) -> Any:
        out = conv(value)
        for v in out if isinstance(out, list) else (out,):
            if isinstance(v, (int, float)) and not isinstance(v, bool) and v < 0:
                raise _Bad(f"{v!r} is negative: not a time or count")
        return out

    return conv_measure


def _make_converter(tp: Any) -> Any:
    if isinstance(tp, type) and is_dataclass(tp):
        hints = get_type_hints(tp)
        # A field marked ``metadata={"text": True}`` keeps its lines (source text an
        # edit replaces: it must match the file byte for byte); it is never printed
        # raw — whoever shows it escapes it (``codec.one_line``, ``markdown.code``).
        items = [
            (
                f.name,
                _check_str
                if f.metadata.get("text")
                else _non_negative(_converter(hints[f.name]))
                if _MEASURE.fullmatch(f.name)
                else _converter(hints[f.name]),
            )
            for f in fields(tp)
        ]
        required = [f.name for f in fields(tp) if f.default is MISSING and f.default_factory is MISSING]

        def conv_dataclass(value: Any) -> Any:
            if type(value) is not dict:
                raise _Bad("expected an object")
            for name in required:
                if name not in value:
                    raise _Bad(f"missing '{name}'")
            kwargs = {}
            for name, conv in items:
                if name in value:
                    try:
                        kwargs[name] = conv(value[name])
                    except _Bad as bad:
                        raise bad.under(f".{name}") from None
            return tp(**kwargs)

        return conv_dataclass
    origin = get_origin(tp)
    if origin is list:
        (item_type,) = get_args(tp)
        item = _converter(item_type)

        def conv_list(value: Any) -> list:
            if type(value) is not list:
                raise _Bad("expected a list")
            out = []
            for i, v in enumerate(value):
                try:
                    out.append(item(v))
                except _Bad as bad:
                    raise bad.under(f"[{i}]") from None
            return out

        return conv_list
    if origin is not None:  # X | None
        (inner_type,) = [a for a in get_args(tp) if a is not type(None)]
        inner = _converter(inner_type)
        return lambda value: None if value is None else inner(value)
    if tp is float:

        def conv_float(value: Any) -> float:
            kind = type(value)
            if kind is not float and kind is not int:
                raise _Bad(f"expected a number, {_got(value)}")
            if not -MAX_NUMBER <= value <= MAX_NUMBER:  # NaN fails both comparisons
                raise _Bad(f"{_figure(value)} is not a number a figure can be")
            return float(value)

        return conv_float
    if tp is str:

        def conv_str(value: Any) -> str:
            if type(value) is not str:
                raise _Bad(f"expected a string, {_got(value)}")
            return one_line(value)

        return conv_str
    simple = {int: "an integer", str: "a string", bool: "true/false"}
    if tp in simple:

        def conv_simple(value: Any) -> Any:
            if type(value) is not tp:
                raise _Bad(f"expected {simple[tp]}, {_got(value)}")
            if tp is int and not -MAX_NUMBER <= value <= MAX_NUMBER:
                raise _Bad(f"{_figure(value)} is not a number a figure can be")
            return value

        return conv_simple
    return lambda value: value

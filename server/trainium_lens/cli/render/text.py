"""Text primitives every CLI renderer shares: the style (colour, unicode), figures,
bars, tables, terminal-safe text. It imports no renderer, so renderers never
import each other for them."""

from __future__ import annotations

import re
from dataclasses import dataclass

from trainium_lens.model import figures
from trainium_lens.model.lines import LineStat
from trainium_lens.model.result import Result

CLOCK_NAMES = {
    "cpu": "CPU self time",
    "cuda": "CUDA kernel time",
    "neuron": "Neuron device time",
    "xla-cpu": "XLA host time per HLO instruction (torch-xla CPU device)",
}


SOURCE_WIDTH = 40


BAR_WIDTH = 8


FINDINGS_WIDTH = 100  # wrap findings here; tables are as wide as their content


_BLOCKS = " ▏▎▍▌▋▊▉█"


@dataclass
class Style:
    unicode: bool = True
    width: int | None = None  # a terminal's columns: wide tables shrink to fit
    verbose: bool = False  # every row of the long sections (xla: fusions, instructions)

    @property
    def mu(self) -> str:
        return "µs" if self.unicode else "us"

    @property
    def ellipsis(self) -> str:
        return "…" if self.unicode else "~"

    @property
    def dash(self) -> str:
        return "–" if self.unicode else "-"

    @property
    def times(self) -> str:
        return "×" if self.unicode else "x"


DEFAULT_STYLE = Style()  # (shared, never mutated)


_ASCII = str.maketrans(
    {"µ": "u", "·": "|", "–": "-", "—": "-", "×": "x", "…": "~", "≤": "<=", "→": "->", "←": "<-", "±": "+-"}
)


# Control characters (ANSI escapes above all) in stored strings must not reach
# the terminal: a result file is untrusted data (docs/security.md).
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def terminal_safe(text: str) -> str:
    """``text`` with every control character but tab and newline shown as ``?``."""
    return _CONTROLS.sub("?", text)


def finish(text: str, style: Style) -> str:
    """The rendered text for the terminal: plain ASCII where it cannot show more
    (messages from the analysis carry µs, ×, – as well), no control characters."""
    text = terminal_safe(text)
    return text if style.unicode else text.translate(_ASCII)


def fmt_us(value: float | None, style: Style = DEFAULT_STYLE) -> str:
    """A time as ``model/figures`` writes it (``4 ns``, ``2.5 µs``, ``1.16 ms``), in the
    style's alphabet; ``-`` for none."""
    if value is None:
        return "-"
    text = figures.time_us(value)
    return text if style.unicode else text.translate(_ASCII)


def fmt_range(low: float, high: float, style: Style = DEFAULT_STYLE) -> str:
    """``10.3–13.2 µs`` (one unit when both ends share it)."""
    lo, hi = fmt_us(low, style), fmt_us(high, style)
    lo_num, _, lo_unit = lo.partition(" ")
    hi_num, _, hi_unit = hi.partition(" ")
    if lo_unit == hi_unit:
        return f"{lo_num}{style.dash}{hi_num} {hi_unit}"
    return f"{lo}{style.dash}{hi}"


def fmt_signed_us(value: float, style: Style = DEFAULT_STYLE) -> str:
    sign = "+" if value > 0 else ("-" if value < 0 else "±")
    return sign + fmt_us(abs(value), style)


def fmt_count(value: float | None) -> str:
    return "-" if value is None else figures.count(value)


def fmt_pct(fraction: float) -> str:
    """A fraction (0.42) as a percentage (``42%``)."""
    return figures.pct(100 * fraction)


def bar(fraction: float, style: Style, width: int = BAR_WIDTH) -> str:
    fraction = min(max(fraction, 0.0), 1.0)
    if not style.unicode:
        return ("#" * round(fraction * width)).ljust(width)
    eighths = round(fraction * width * 8)
    full, part = divmod(eighths, 8)
    return ("█" * full + (_BLOCKS[part] if part else "")).ljust(width)


def truncate(text: str, width: int, style: Style) -> str:
    text = text.strip()
    return text if len(text) <= width else text[: width - 1] + style.ellipsis


def clock_label(result: Result) -> str:
    """The heading tag for primary-clock columns: the clock that produced them."""
    if result.backend != "cpu" and not result.signals.device_time_reported:
        return "cpu"  # the harness fell back to CPU time; say so in every heading
    return result.clock


def table(
    headers: list[str],
    rows: list[list[str]],
    align: str,
    indent: str = "  ",
    width: int | None = None,
    shrink: dict[int, int] | None = None,
    ellipsis: str = "…",
) -> list[str]:
    """Columns aligned per ``align`` ("l"/"r" per column); two spaces between.

    With ``width`` (a terminal's), the columns in ``shrink`` (index: narrowest
    allowed), in that order, give up characters until the table fits."""
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=False)]
    if width is not None and shrink:
        over = len(indent) + sum(widths) + 2 * (len(widths) - 1) - width
        for col, narrowest in shrink.items():
            if over <= 0:
                break
            cut = min(over, max(0, widths[col] - max(narrowest, len(headers[col]))))
            widths[col] -= cut
            over -= cut
        rows = [
            [c if len(c) <= widths[i] else c[: widths[i] - 1] + ellipsis for i, c in enumerate(row)]
            for row in rows
        ]

    def fmt(cells: list[str]) -> str:
        out = [c.ljust(w) if a == "l" else c.rjust(w) for c, w, a in zip(cells, widths, align, strict=False)]
        return (indent + "  ".join(out)).rstrip()

    return [fmt(headers)] + [fmt(r) for r in rows]


def line_ref(stat: LineStat, result: Result) -> str:
    """A line's number; a line of another file (a helper module, an --include'd
    library) also names its file."""
    return str(stat.line) if stat.file == result.function.file else f"{stat.file}:{stat.line}"


def spans(lines: list[int], style: Style) -> str:
    spans: list[str] = []
    start: int | None = None
    prev: int | None = None
    for n in [*lines, None]:
        if start is None:
            start = prev = n
        elif n is not None and prev is not None and n == prev + 1:
            prev = n
        else:
            spans.append(str(start) if start == prev else f"{start}{style.dash}{prev}")
            start = prev = n
    return ", ".join(spans)

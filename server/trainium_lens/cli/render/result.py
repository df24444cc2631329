"""Terminal rendering of results: plain text, aligned columns, no dependencies.

Every time column names its clock ("self (cpu)", "self (neuron)"): a CPU
figure is never shown under a device heading. The output depends only on the
result (not on the terminal width), so ``show`` re-prints exactly what
``profile`` printed.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass

from trainium_lens.analysis.findings.analyze import direct_ops
from trainium_lens.model.result import LineStat, Result

CLOCK_NAMES = {
    "cpu": "CPU self time",
    "cuda": "CUDA kernel time",
    "neuron": "Neuron device time",
    "xla-cpu": "XLA host time per HLO instruction (torch-xla CPU device)",
}
SOURCE_WIDTH = 40
TOP_OPS = 3
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
# the terminal: a result file is untrusted data (README, "Security").
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def terminal_safe(text: str) -> str:
    """``text`` with every control character but tab and newline shown as ``?``."""
    return _CONTROLS.sub("?", text)


def finish(text: str, style: Style) -> str:
    """The rendered text for the terminal: plain ASCII where it cannot show more
    (messages from the analysis carry µs, ×, – as well), no control characters."""
    text = terminal_safe(text)
    return text if style.unicode else text.translate(_ASCII)


# -- numbers -----------------------------------------------------------------------


def fmt_us(value: float | None, style: Style = DEFAULT_STYLE) -> str:
    """Human time, ~3 significant digits: ``0.42 µs``, ``12.3 µs``, ``1.23 ms``."""
    if value is None:
        return "-"
    v = float(value)
    if abs(v) >= 1e6:
        return f"{v / 1e6:.3g} s" if abs(v) < 1e8 else f"{v / 1e6:.0f} s"
    if abs(v) >= 1e3:
        ms = v / 1e3
        return f"{ms:.2f} ms" if abs(ms) < 10 else f"{ms:.1f} ms" if abs(ms) < 100 else f"{ms:.0f} ms"
    if abs(v) >= 100:
        return f"{v:.0f} {style.mu}"
    if abs(v) >= 10:
        return f"{v:.1f} {style.mu}"
    return f"{v:.2f} {style.mu}"


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
    if value is None:
        return "-"
    return f"{value:g}" if value == int(value) else f"{value:.2f}"


def fmt_pct(fraction: float) -> str:
    pct = 100 * fraction
    return f"{pct:.0f}%" if pct >= 9.95 or pct == 0 else f"{pct:.1f}%"


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


# -- tables ------------------------------------------------------------------------


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


# -- one result --------------------------------------------------------------------


def line_ref(stat: LineStat, result: Result) -> str:
    """A line's number; a line of another file (a helper module, an --include'd
    library) also names its file."""
    return str(stat.line) if stat.file == result.function.file else f"{stat.file}:{stat.line}"


def noisy(result: Result) -> bool:
    return any(f.kind == "noisy_measurement" for f in result.findings)


def reconciled_text(result: Result, style: Style = DEFAULT_STYLE) -> str | None:
    """``0.89× wall``: the primary figure per call over its independent reference."""
    rec = result.reconciliation
    if rec is None:
        return None
    ref = "device span" if rec.reference == "device_span" else "wall"
    mark = "" if rec.within else " !"
    return f"{rec.ratio:.2f}{style.times} {ref}{mark}"


def headline(result: Result, style: Style = DEFAULT_STYLE) -> str:
    clock = clock_label(result)
    t = result.totals
    # The figure per call is what the ratio reconciles: on the cpu clock the ops plus the
    # host time between them (the Python a call runs), so it can be read against the wall.
    host = t.host_time_us if result.clock == "cpu" else None
    parts = [f"{fmt_us(result.per_call_us, style)} {clock} per call"]
    rec = reconciled_text(result, style)
    if host:
        rec = f"ops {fmt_us(t.self_time_us, style)} + host {fmt_us(host, style)}" + (
            f"; {rec}" if rec else ""
        )
    if rec:
        parts[0] += f" ({rec})"
    if noisy(result):
        parts.append("NOISY: figures unreliable")
    graphs = result.signals.graphs_per_step
    if graphs:
        parts.append(f"{fmt_count(graphs)} graph{'s' if graphs != 1 else ''} per step")
    if t.dispatches:
        parts.append(f"{fmt_count(t.dispatches)} dispatch" + ("" if t.dispatches == 1 else "es"))
    hot = max(result.lines, key=lambda s: s.time_us, default=None)
    if hot is not None and t.self_time_us > 0:
        parts.append(f"hottest line {line_ref(hot, result)} ({fmt_pct(hot.time_us / t.self_time_us)})")
    if t.has_backward and t.self_time_us > 0:
        parts.append(f"backward {fmt_pct(t.backward_time_us / t.self_time_us)}")
    elif result.regions and result.backend != "xla":  # xla: everything is one compiled graph
        parts.append(f"compiled region on line {result.regions[0].line}")
    return ", ".join(parts)


def render_result(result: Result, style: Style = DEFAULT_STYLE) -> str:
    f, t = result.function, result.totals
    clock = clock_label(result)
    p = f.protocol
    clock_text = CLOCK_NAMES.get(clock, clock)
    if result.backend != "cpu" and not result.signals.device_time_reported:
        clock_text += f" (no {result.backend} device time was reported)"
    elif result.calibration is not None:
        clock_text += ", calibrated"
    out = [
        f"{f.name}  {f.file}:{f.line}",
        f"  backend {result.backend} · clock: {clock_text} · host {result.host}",
        f"  {t.steps} measured steps (wait {p.wait}, warmup {p.warmup}, active {p.active}); "
        f"figures are per call",
        f"  {headline(result, style)}",
        f"  unprofiled wall time {fmt_us(t.wall_us_median, style)} median over "
        f"{p.timing_calls} calls"
        + (
            f" ({fmt_range(t.wall_us_min, t.wall_us_max, style)})"
            if t.wall_us_min is not None and t.wall_us_max is not None
            else ""
        ),
        f"  run {result.run_id}",
        "",
    ]
    out[-1:-1] = _trust_lines(result, style)
    out += _lines_table(result, clock, style)
    if result.backend == "xla":  # a compiled graph: hundreds of instructions, kept to a screen
        from trainium_lens.cli.render.xla import instructions_table, regions_section

        out += regions_section(result, clock, style)
        out += ["", *instructions_table(result, clock, style)]
    else:
        if result.regions:
            out += ["", "  compiled regions"]
            for region in result.regions:
                covered = sorted({c.line for c in region.covered_lines})
                span = f"covers lines {_spans(covered, style)}" if covered else "covered lines unknown"
                nodes = f", {region.fx_nodes} ops fused" if region.fx_nodes else ""
                phase = f" ({region.phase})" if region.phase != "forward" else ""
                out.append(
                    f"    {region.name}{phase}: line {region.line}, "
                    f"{fmt_us(region.self_time_us, style)} ({clock}), {span}{nodes}"
                )
        out += ["", *_ops_table(result, clock, style)]
    out += ["", *render_findings(result, style)]
    return finish("\n".join(out), style)


def _trust_lines(result: Result, style: Style) -> list[str]:
    """How far the figures can be trusted: reconciliation, calibration, the host."""
    out = []
    rec, cal, st = result.reconciliation, result.calibration, result.stability
    if rec is not None:
        ref = "device-side span" if rec.reference == "device_span" else "unprofiled wall"
        raw = (
            f"; raw {fmt_us(rec.raw_us, style)}, {rec.raw_us / rec.reference_us:.2f}{style.times}"
            if rec.raw_us
            else ""
        )
        tol = f"±{rec.tolerance:.0%}" if result.clock == "cpu" else f"at most +{rec.tolerance:.0%}"
        verdict = f"within {tol}" if rec.within else f"OUTSIDE {tol}"
        verdict += f"; {rec.note}" if rec.note else ""
        host = result.totals.host_time_us if result.clock == "cpu" else None
        summed = (
            f"ops {fmt_us(result.totals.self_time_us, style)} + host between ops {fmt_us(host, style)} = "
            if host is not None
            else ""
        )
        out.append(
            f"  reconciled: {summed}{fmt_us(rec.profiled_us, style)} per call = {rec.ratio:.2f}{style.times} "
            f"the {ref} {fmt_us(rec.reference_us, style)}{raw} ({verdict})"
        )
    if cal is not None:
        out.append(
            f"  calibrated: the profiler's cost, {cal.per_depth_us * 1000:.0f} ns per op event per "
            f"nesting level, measured in {cal.cost_s:.2f} s; {fmt_us(cal.subtracted_us, style)} per "
            f"call subtracted (raw figures in the JSON: self_cpu_us)"
        )
    if st is not None and st.steps_measured:
        parts = [f"{st.steps_clean} of {st.steps_measured} steps undisturbed"]
        if st.extra_steps:
            parts[0] += f" ({st.extra_steps} extra measured)"
        if st.calls_per_step > 1:
            parts.append(f"{st.calls_per_step} calls per step")
        if st.others_cores is not None:
            parts.append(f"other processes used {st.others_cores:.1f} cores")
        if st.run_delay_share is not None:
            parts.append(f"run-queue wait {st.run_delay_share:.0%} of step time")
        out.append("  machine: " + ", ".join(parts))
    return out


def _spans(lines: list[int], style: Style) -> str:
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


def _lines_table(result: Result, clock: str, style: Style) -> list[str]:
    """Per line: forward self (spread, total), then — for a training step — the
    backward it caused and forward + backward; share and bar of the step."""
    train = result.totals.has_backward
    total = result.totals.self_time_us
    host = result.totals.host_time_us is not None and any(s.host_time_us for s in result.lines)
    rows = []
    for s in sorted(result.lines, key=lambda s: (s.file != result.function.file, s.file, s.line)):
        cost = s.time_us if train else s.self_time_us
        share = cost / total if total > 0 else 0.0
        spread = fmt_range(s.self_time_us_min, s.self_time_us_max, style) if s.self_time_us_max else ""
        direct = direct_ops(s, result)  # what the line itself called, then the rest
        ops = direct + sorted((o for o in s.ops if o not in direct), key=lambda o: -o.self_time_us)
        top = ", ".join(f"{o.name.split('::')[-1]} {style.times}{fmt_count(o.calls)}" for o in ops[:TOP_OPS])
        if len(ops) > TOP_OPS:
            top += f", +{len(ops) - TOP_OPS}"
        row = [
            line_ref(s, result),
            truncate(s.text, SOURCE_WIDTH, style),
            fmt_us(s.self_time_us, style),
            spread,
            fmt_us(s.total_time_us, style),
        ]
        if train:
            bwd = fmt_us(s.backward_self_time_us, style) if s.backward_self_time_us else ""
            if s.recompute_time_us:
                bwd += f" +{fmt_us(s.recompute_time_us, style)} re"
            row += [
                bwd,
                fmt_us(s.backward_total_time_us, style) if s.backward_total_time_us else "",
                fmt_us(cost, style),
            ]
        if host:
            row.append(fmt_us(s.host_time_us, style) if s.host_time_us else "")
        rows.append(row + [fmt_pct(share), bar(share, style), fmt_count(s.calls), top])
    named = [(f"({b.name})", b.self_time_us) for b in result.buckets]  # xla: known, no line
    for name, time in [*named, ("(unattributed)", result.unattributed_us)]:
        if not time:
            continue
        share = time / total if total > 0 else 0.0
        rows.append(
            ["", name, fmt_us(time, style), "", ""]
            + (["", "", fmt_us(time, style)] if train else [])
            + ([""] if host else [])
            + [fmt_pct(share), bar(share, style), "", ""]
        )
    if not rows:
        return ["  (no ops were attributed to a line)"]
    fwd = "fwd " if train else ""
    headers = [
        "line",
        "source",
        f"{fwd}self ({clock})",
        "min–max" if style.unicode else "min-max",
        f"{fwd}total ({clock})",
    ]
    align = "llrrr"
    if train:
        headers += [f"bwd self ({clock})", "bwd total", "fwd+bwd"]
        align += "rrr"
    if host:  # Python / the autograd engine before the line's ops: in the wall, in no op
        headers.append("host")
        align += "r"
    headers += ["share", "", "calls", "top ops"]
    align += "rlrl"
    bar_col = len(headers) - 3
    if style.width is not None:
        # A narrow terminal: drop the spread, then the bar, before cutting text.
        for drop in (3, bar_col - 1):  # (indices after the first drop)
            if all(len(ln) <= style.width for ln in table(headers, rows, align)):
                break
            headers = headers[:drop] + headers[drop + 1 :]
            rows = [r[:drop] + r[drop + 1 :] for r in rows]
            align = align[:drop] + align[drop + 1 :]
    # Then the op names give way first, then the source text.
    last, source = len(headers) - 1, 1
    out = table(
        headers, rows, align, width=style.width, shrink={last: 10, source: 16}, ellipsis=style.ellipsis
    )
    if train:
        t = result.totals
        out.append(
            f"  step: forward {fmt_us(t.forward_time_us, style)} · backward "
            f"{fmt_us(t.backward_time_us, style)} · optimizer {fmt_us(t.optimizer_time_us, style)}"
            + (f" · recompute {fmt_us(t.recompute_time_us, style)}" if t.recompute_time_us else "")
            + f" ({clock})"
        )
    return out


def _ops_table(result: Result, clock: str, style: Style) -> list[str]:
    if not result.ops:
        return ["  (no ATen ops recorded)"]
    ops = sorted(result.ops, key=lambda o: -o.self_time_us)
    show_cpu = clock != "cpu" or result.calibration is not None
    rows = []
    for o in ops:
        row = [o.name, fmt_count(o.calls), fmt_us(o.self_time_us, style), fmt_us(o.total_time_us, style)]
        if show_cpu:
            row.append(fmt_us(o.self_cpu_us, style))
        rows.append(row)
    headers = ["op", "calls", f"self ({clock})", f"total ({clock})"]
    if show_cpu:
        headers.append("self (cpu)" if clock != "cpu" else "raw (cpu)")
    return table(headers, rows, "lrrrr")


def render_findings(result: Result, style: Style = DEFAULT_STYLE) -> list[str]:
    if not result.findings:
        return ["  no findings"]
    out = ["  findings"]
    for f in result.findings:
        head = f"    {f.severity:<7}  {f.file}:{f.line}  "
        text = f.message + (f" Fix: {f.fix}." if f.fix and f.fix not in f.message else "")
        width = min(FINDINGS_WIDTH, style.width or FINDINGS_WIDTH)
        out += textwrap.wrap(
            text,
            width=max(width, len(head) + 30),
            initial_indent=head,
            subsequent_indent=" " * len(head),
            break_on_hyphens=False,
        )
    return out

"""Terminal rendering of comparisons: a file's variants side by side
(``analysis.variants``) and one run against another (``analysis.compare``).

The ranking column is always the true clock (device time, else the unprofiled
wall median) and says which; the profiled CPU figure, when shown, is headed
"profiled" so it never reads as the ranking.
"""

from __future__ import annotations

from trainium_lens.analysis.compare import LineDelta, RunDiff
from trainium_lens.analysis.variants import BASIS_DEVICE, BASIS_WALL, Comparison, VariantRow
from trainium_lens.cli.render.text import (
    CLOCK_NAMES,
    SOURCE_WIDTH,
    Style,
    finish,
    fmt_count,
    fmt_range,
    fmt_signed_us,
    fmt_us,
    table,
    truncate,
)
from trainium_lens.model import figures


def _speed(value: float | None, style: Style) -> str:
    """``1.8×``, ``0.0045×`` (``model/figures.ratio``, in the style's alphabet)."""
    if not value:
        return "-"
    return figures.number(value) + style.times


def _verdict(r: VariantRow, style: Style) -> str:
    le, gt = ("≤", ">") if style.unicode else ("<=", ">")
    if r.tolerance is None:
        return r.verdict
    return r.verdict + {
        "ok": f" ({le} {r.tolerance:.2g})",
        "differs": f" ({gt} {r.tolerance:.2g})",
        "unchecked": f" ({gt} atol {r.tolerance:.2g}, magnitude unknown)",
    }.get(r.verdict, "")


def render_comparison(comparison: Comparison, style: Style | None = None) -> str:
    """The variants' table: ranking column (device time or wall median) and
    speedup first, then where the time went (profiled), dispatches, output."""
    style = style or Style()
    clock = comparison.clock
    device = comparison.speedup_basis == BASIS_DEVICE
    train = any(r.backward_us is not None for r in comparison.rows)
    headers = ["variant", "line"]
    if device:
        headers += [f"time ({clock})", "speedup"]
    else:
        # named for what they hold: the walls timed in turn are not the header's own wall,
        # and the profiled figure is the headline's (ops + host on the cpu clock)
        headers += [
            "wall in turn" if comparison.walls_in_turn else "wall median",
            "min–max" if style.unicode else "min-max",
            "speedup",
            f"profiled ({clock}, ops + host)" if clock == "cpu" else f"profiled ({clock})",
        ]
    if train:  # a training step: where the (profiled) time went
        headers += ["fwd", "bwd", "optimizer"]
    if device:
        headers += ["self (cpu)", "dispatches", "wall median"]
    else:
        headers += ["dispatches"]
    headers += ["max |diff|", "output"]
    rows = []
    for r in comparison.rows:
        row = [r.variant, str(r.line)]
        speed = _speed(r.speedup, style) + (" (busy)" if r.wall_noisy else "")
        if device:
            row += [fmt_us(r.time_us, style), speed]
        else:
            spread = (
                fmt_range(r.wall_us_min, r.wall_us_max, style)
                if r.wall_us_min is not None and r.wall_us_max is not None
                else ""
            )
            shown = r.per_call_us if r.per_call_us is not None else r.time_us
            row += [fmt_us(r.wall_us_median, style), spread, speed, fmt_us(shown, style)]
        if train:
            row += [fmt_us(r.forward_us, style), fmt_us(r.backward_us, style), fmt_us(r.optimizer_us, style)]
        if device:
            row += [fmt_us(r.self_cpu_us, style), fmt_count(r.dispatches), fmt_us(r.wall_us_median, style)]
        else:
            row += [fmt_count(r.dispatches)]
        diff = "-" if r.max_abs_diff is None else f"{r.max_abs_diff:.3g}"
        rows.append(row + [diff, _verdict(r, style)])
    basis = comparison.speedup_basis
    walls = (
        "the unprofiled walls timed in turn, the variants called in rounds"
        if comparison.walls_in_turn
        else "the unprofiled wall medians"
    )
    on = {BASIS_DEVICE: f"{CLOCK_NAMES.get(clock, clock)}", BASIS_WALL: walls}
    head = (
        f"comparison (speedup from {on[basis]}, output against {comparison.reference})"
        if basis
        else f"comparison (output against {comparison.reference})"
    )
    out = [head]
    out += table(headers, rows, "lr" + "r" * (len(headers) - 3) + "l")
    fastest = next((r for r in comparison.rows if r.variant == comparison.fastest), None)
    if fastest is not None and len(comparison.rows) > 1:
        figure = fmt_us(fastest.time_us if device else fastest.wall_us_median, style)
        named = "wall in turn" if comparison.walls_in_turn and basis == BASIS_WALL else basis
        out.append(f"  fastest: {fastest.variant} ({figure}, {named})")
    elif any(r.wall_noisy for r in comparison.rows):
        out.append("  fastest: not judged (the host was busy during the wall timing)")
    if comparison.note:
        out.append(f"  note: {comparison.note}")
    return finish("\n".join(out), style)


# -- one run against another -------------------------------------------------------


def _where(d: LineDelta, home: str) -> str:
    if d.before_line in (None, d.after_line):
        number = str(d.after_line)
    elif d.after_line is None:
        number = str(d.before_line)
    else:
        number = f"{d.before_line}→{d.after_line}"
    return number if d.file in ("", home) else f"{d.file}:{number}"


def _change(before: float | None, after: float | None, style: Style) -> str:
    """``92.7 µs → 50.0 µs``; a side the line does not exist on reads ``-``;
    nothing on both sides (a line without backward) reads empty."""
    if not before and not after:
        return ""
    return f"{fmt_us(before, style)} → {fmt_us(after, style)}"


def _signed(delta: float, before: float | None, after: float | None, style: Style) -> str:
    return fmt_signed_us(delta, style) if before or after else ""


def _ratio(value: float | None, style: Style) -> str:
    return figures.number(value) + style.times if value else ""


def _own(d: LineDelta) -> bool:
    """The line has a figure of its own on either side (not only callees' time)."""
    return bool(d.before_us or d.after_us)


def render_diff(diff: RunDiff, style: Style | None = None) -> str:
    style = style or Style()
    t = diff.totals
    ratio = f", {figures.number(t.ratio)}{style.times}" if t.ratio else ""
    out = [f"{diff.function}: {diff.before} → {diff.after}"]
    if diff.note:
        out.append(f"  note: {diff.note}")
    out.append(
        f"  total ({diff.clock}) {fmt_us(t.before_us, style)} → {fmt_us(t.after_us, style)}"
        f" ({fmt_signed_us(t.delta_us, style)}{ratio}); dispatches "
        f"{fmt_count(t.before_dispatches)} → {fmt_count(t.after_dispatches)}; wall median "
        f"{fmt_us(t.before_wall_us, style)} → {fmt_us(t.after_wall_us, style)}"
    )
    if diff.backward:
        out.append(
            f"  step ({diff.clock}): forward {_change(t.before_forward_us, t.after_forward_us, style)}"
            f" · backward {_change(t.before_backward_us, t.after_backward_us, style)}"
            f" · optimizer {_change(t.before_optimizer_us, t.after_optimizer_us, style)}"
        )
    if t.speedup:
        out.append(
            f"  speedup {_speed(t.speedup, style)} ({t.speedup_basis}; the per-line figures are "
            f"{'profiled ' if t.speedup_basis == BASIS_WALL else ''}{diff.clock} time)"
        )
    shown = [d for d in diff.lines if _own(d)]
    hidden = len(diff.lines) - len(shown)
    rows = [_diff_row(d, diff, style) for d in shown]
    if rows:
        rows += _total_rows(diff, style)
    clock = diff.clock
    if diff.backward:
        headers = [
            "line",
            "source",
            f"fwd ({clock})",
            "Δ fwd",
            f"bwd ({clock})",
            "Δ bwd",
            f"fwd+bwd ({clock})",
            "Δ",
            "ratio",
            "status",
        ]
    else:
        headers = ["line", "source", f"before ({clock})", f"after ({clock})", "delta", "ratio", "status"]
    out.append("")
    if rows:
        out += table(headers, rows, "ll" + "r" * (len(headers) - 3) + "l")
        if hidden:
            its, they = ("its", "it calls") if hidden == 1 else ("their", "they call")
            out.append(
                f"  {hidden} line{'' if hidden == 1 else 's'} not shown: no time of {its} own on "
                f"either side ({its} time is on the lines {they})"
            )
    else:
        out.append("  (no lines)")
    return finish("\n".join(out), style)


def _diff_row(d: LineDelta, diff: RunDiff, style: Style) -> list[str]:
    head = [_where(d, diff.file), truncate(d.text, SOURCE_WIDTH, style)]
    tail = [_ratio(d.ratio, style), d.status]
    if not diff.backward:
        return (
            head
            + [fmt_us(d.before_us, style), fmt_us(d.after_us, style), fmt_signed_us(d.delta_us, style)]
            + tail
        )
    return (
        head
        + [
            _change(d.before_fwd_us, d.after_fwd_us, style),
            _signed(d.fwd_delta_us, d.before_fwd_us, d.after_fwd_us, style),
            _change(d.before_bwd_us, d.after_bwd_us, style),
            _signed(d.bwd_delta_us, d.before_bwd_us, d.after_bwd_us, style),
            _change(d.before_us, d.after_us, style),
            fmt_signed_us(d.delta_us, style),
        ]
        + tail
    )


def _total_rows(diff: RunDiff, style: Style) -> list[list[str]]:
    """The unattributed bucket and the sum: the rows above plus it are the step."""
    t = diff.totals
    b_un, a_un = t.before_unattributed_us, t.after_unattributed_us
    rows = []
    if diff.backward:
        if b_un or a_un:
            rows.append(
                [
                    "",
                    "(unattributed)",
                    "",
                    "",
                    "",
                    "",
                    _change(b_un, a_un, style),
                    fmt_signed_us(a_un - b_un, style),
                ]
                + [_ratio(a_un / b_un if b_un else None, style), ""]
            )
        # the step line's forward figure holds the optimizer's ops (they run there);
        # the total's forward column is the forward alone (the optimizer is in the
        # step line above the table, and in the fwd+bwd total)
        b_fwd = max(0.0, t.before_lines_fwd_us - t.before_optimizer_us)
        a_fwd = max(0.0, t.after_lines_fwd_us - t.after_optimizer_us)
        rows.append(
            [
                "",
                "total",
                _change(b_fwd, a_fwd, style),
                fmt_signed_us(a_fwd - b_fwd, style),
                _change(t.before_lines_bwd_us, t.after_lines_bwd_us, style),
                fmt_signed_us(t.after_lines_bwd_us - t.before_lines_bwd_us, style),
                _change(t.before_us, t.after_us, style),
                fmt_signed_us(t.delta_us, style),
                _ratio(t.ratio, style),
                "",
            ]
        )
        return rows
    if b_un or a_un:
        rows.append(
            [
                "",
                "(unattributed)",
                fmt_us(b_un, style),
                fmt_us(a_un, style),
                fmt_signed_us(a_un - b_un, style),
            ]
            + [_ratio(a_un / b_un if b_un else None, style), ""]
        )
    rows.append(
        ["", "total", fmt_us(t.before_us, style), fmt_us(t.after_us, style), fmt_signed_us(t.delta_us, style)]
        + [_ratio(t.ratio, style), ""]
    )
    return rows

"""Terminal rendering of results: plain text, aligned columns, no dependencies.

Every time column names its clock ("self (cpu)", "self (neuron)"): a CPU
figure is never shown under a device heading. The output depends only on the
result (not on the terminal width), so ``show`` re-prints exactly what
``profile`` printed.
"""

from __future__ import annotations

import textwrap

from trainium_lens.analysis.findings.ops import direct_ops
from trainium_lens.cli.render.text import (
    CLOCK_NAMES,
    DEFAULT_STYLE,
    FINDINGS_WIDTH,
    SOURCE_WIDTH,
    Style,
    bar,
    clock_label,
    finish,
    fmt_count,
    fmt_pct,
    fmt_range,
    fmt_us,
    line_ref,
    spans,
    table,
    truncate,
)
from trainium_lens.model import figures
from trainium_lens.model.fit import KINDS, mostly_fit_text
from trainium_lens.model.result import Result

TOP_OPS = 3


# -- numbers -----------------------------------------------------------------------


# -- tables ------------------------------------------------------------------------


# -- one result --------------------------------------------------------------------


def noisy(result: Result) -> bool:
    return any(f.kind == "noisy_measurement" for f in result.findings)


def reconciled_text(result: Result, style: Style = DEFAULT_STYLE) -> str | None:
    """``0.89× wall``: the primary figure per call over its independent reference."""
    rec = result.reconciliation
    if rec is None:
        return None
    ref = "device span" if rec.reference == "device_span" else "wall"
    mark = "" if rec.within else " !"
    # a fitted result's figure meets the wall by its fit: the ratio is the unfitted one's
    unfitted = "unfitted " if rec.shown_us is not None else ""
    return f"{unfitted}{figures.number(rec.ratio)}{style.times} {ref}{mark}"


def headline(result: Result, style: Style = DEFAULT_STYLE) -> str:
    clock = clock_label(result)
    t = result.totals
    # The figure per call is what the ratio reconciles: on the cpu clock the ops plus the
    # host time between them (the Python a call runs), so it can be read against the wall.
    host = t.host_time_us if result.clock == "cpu" else None
    parts = [f"{fmt_us(result.per_call_us, style)} {clock} per {result.unit}"]
    rec = reconciled_text(result, style)
    if not figures.is_zero_time(host):
        rec = f"ops {fmt_us(t.self_time_us, style)} + host {fmt_us(host, style)}" + (
            f"; {rec}" if rec else ""
        )
    if rec:
        parts[0] += f" ({rec})"
    if noisy(result):
        parts.append("NOISY: figures unreliable")
    fitted = mostly_fit_text(result.fit, result.unit)
    if fitted:
        parts.append(fitted.replace("mostly fitted", "MOSTLY FITTED", 1))
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
        f"  {figures.plural(t.steps, 'measured step')} "
        f"(wait {p.wait}, warmup {p.warmup}, active {p.active}); "
        f"figures are per {result.unit}",
        f"  {headline(result, style)}",
        f"  unprofiled wall time {fmt_us(t.wall_us_median, style)} median over {_wall_counts(result)}"
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
                span = f"covers lines {spans(covered, style)}" if covered else "covered lines unknown"
                nodes = f", {region.fx_nodes} ops fused" if region.fx_nodes else ""
                phase = f" ({region.phase})" if region.phase != "forward" else ""
                out.append(
                    f"    {region.name}{phase}: line {region.line}, "
                    f"{fmt_us(region.self_time_us, style)} ({clock}), {span}{nodes}"
                )
        out += ["", *_ops_table(result, clock, style)]
    out += ["", *render_findings(result, style)]
    return finish("\n".join(out), style)


def _wall_counts(result: Result) -> str:
    """What the wall's median was taken over: the samples used of those timed, how
    many were clean, how many calls each sample held ("17 of 60 calls clean")."""
    st, wanted = result.stability, result.function.protocol.timing_calls
    if st is None or not st.timing_calls:
        return f"{wanted} {result.unit}s"
    unit = "samples" if st.timing_batch > 1 else f"{result.unit}s"
    used = st.timing_used or (st.timing_clean if st.timing_clean >= (wanted + 1) // 2 else st.timing_calls)
    text = f"{used} {unit} ({st.timing_clean} of {st.timing_calls} {unit} clean"
    if st.timing_batch > 1:
        text += f"; {st.timing_batch} back-to-back calls each, the loop's cost subtracted"
    return text + ")"


def _trust_lines(result: Result, style: Style) -> list[str]:
    """How far the figures can be trusted: reconciliation, calibration, the host."""
    out = []
    rec, cal, st = result.reconciliation, result.calibration, result.stability
    if rec is not None:
        ref = "device-side span" if rec.reference == "device_span" else "unprofiled wall"
        raw = (
            f"; raw {fmt_us(rec.raw_us, style)}, {figures.number(rec.raw_us / rec.reference_us)}{style.times}"
            if rec.raw_us
            else ""
        )
        tol = f"±{rec.tolerance:.0%}" if result.clock == "cpu" else f"at most +{rec.tolerance:.0%}"
        verdict = f"within {tol}" if rec.within else f"OUTSIDE {tol}"
        if not rec.within and result.clock == "cpu" and abs(rec.ratio - 1) <= rec.tolerance:
            verdict = f"within {tol}, NOT RECONCILED"  # the figure shown or the host's speed did not hold
        verdict += f"; {rec.note}" if rec.note else ""
        fit = result.fit if result.clock == "cpu" else None
        host = result.totals.host_time_us if result.clock == "cpu" else None
        if fit is not None and fit.parts:  # what was compared: the figure the fit to the wall did not touch
            summed = (
                f"unfitted: ops {fmt_us(fit.ops_us, style)} (calibration as read) + host between ops "
                f"{fmt_us(fit.host_us, style)} (as read) = "
            )
        elif host is not None:
            summed = (
                f"ops {fmt_us(result.totals.self_time_us, style)} + host between ops {fmt_us(host, style)} = "
            )
        else:
            summed = ""
        out.append(
            f"  reconciled: {summed}{fmt_us(rec.profiled_us, style)} per {result.unit} = "
            f"{figures.number(rec.ratio)}{style.times} "
            f"the {ref} {fmt_us(rec.reference_us, style)}{raw} ({verdict})"
        )
        if fit is not None and fit.parts and not rec.within:  # within: the note says it
            said = ", ".join(
                f"{KINDS.get(p.kind, p.kind)} {'+' if p.us > 0 else ''}{fmt_us(p.us, style)}"
                for p in fit.parts
            )
            out.append(
                f"  fitted: the figures shown ({fmt_us(fit.fitted_us, style)} per {result.unit}) took "
                f"{figures.pct(100 * fit.share)} from the wall: {said}"
            )
    if cal is not None:
        out.append(
            f"  calibrated: the profiler's cost, {figures.time_us(cal.per_depth_us)} per op event per "
            f"nesting level"
            + (
                f" (read {figures.time_us(cal.per_depth_read_us)}, bounded by the wall)"
                if cal.per_depth_read_us is not None
                else ""
            )
            + (f", {cal.source}" if cal.source.startswith("shared") else f", measured in {cal.cost_s:.2f} s")
            + f"; {fmt_us(cal.subtracted_us, style)} per "
            f"{result.unit} subtracted (raw figures in the JSON: self_cpu_us)"
        )
    if st is not None and st.steps_measured:
        parts = [f"{st.steps_clean} of {figures.plural(st.steps_measured, 'step')} undisturbed"]
        if st.extra_steps:
            parts[0] += f" ({st.extra_steps} extra measured)"
        if st.calls_per_step > 1:
            parts.append(f"{st.calls_per_step} calls per step")
        if st.others_cores is not None:
            of = f" of {st.cpus}" if st.cpus else ""
            parts.append(f"processes outside the job used {st.others_cores:.1f}{of} cores")
        if st.job_cores:
            parts.append(f"the job's other processes {st.job_cores:.1f}")
        if st.run_delay_share is not None:
            parts.append(f"run-queue wait {figures.pct(100 * st.run_delay_share)} of step time")
        out.append("  machine: " + ", ".join(parts))
    return out


def _lines_table(result: Result, clock: str, style: Style) -> list[str]:
    """Per line: forward self (spread, total), then — for a training step — the
    backward it caused and forward + backward; share and bar of the step."""
    train = result.totals.has_backward
    total = result.totals.self_time_us
    host = result.totals.host_time_us is not None and any(
        not figures.is_zero_time(s.host_time_us) for s in result.lines
    )
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
            row.append("" if figures.is_zero_time(s.host_time_us) else fmt_us(s.host_time_us, style))
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

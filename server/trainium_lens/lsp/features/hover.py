"""Hover on an annotated line: the ops behind it and where to look next.

Markdown (the client renders it trusted, for the command links): the line's
op table (name, calls, self time, CPU time), self vs total, the spread over the
measured steps, the delta against the previous run, the line's work and roofline
(FLOPs, bytes, % of peak, memory), findings on the line, the
line's time window in trace time, and links to the timeline / Neuron Explorer.
Every string that comes from the stored result goes through
``present.markdown`` (``escape``/``code``): a result is untrusted data.
"""

from __future__ import annotations

from lsprotocol import types

from trainium_lens.lsp.present import format as fmt
from trainium_lens.lsp.present import rank_format, roofline_format, trust
from trainium_lens.lsp.present.history import section as history_section
from trainium_lens.lsp.present.hover_hlo import hlo_section
from trainium_lens.lsp.present.markdown import code, command_link, escape
from trainium_lens.lsp.runs import Annotation, Annotations
from trainium_lens.lsp.state import LensServer
from trainium_lens.model import figures
from trainium_lens.model.result import Result

CLOCK_WORDS = {
    "neuron": "Neuron device time",
    "cuda": "CUDA kernel time",
    "cpu": "CPU self time (no device)",
    "xla-cpu": "XLA host time per HLO instruction (torch-xla CPU device)",
}


def markdown(uri: str, a: Annotation, annotations: Annotations, history: list[Result] | None = None) -> str:
    r, s = a.result, a.stat
    clock = escape(fmt.clock_suffix(r))
    out = [
        f"**Trainium Lens** · line {s.line} of {code(r.function.name)} · "
        f"{escape(CLOCK_WORDS.get(r.clock, r.clock))}"
    ]
    if a.stale:
        out.append(f"_Stale: this line changed since run {code(r.run_id)}; profile again to refresh._")
    share = figures.share(a.time_us, r.totals.self_time_us)
    out.append(
        f"self **{figures.time_us(s.self_time_us)}{clock}**{trust.raw_beside(s, r)} · total "
        f"{figures.time_us(s.total_time_us)}{clock} · {share} of the function · "
        f"{fmt.plural(s.calls, 'op')} per {r.unit}"
    )
    out += [h] if (h := trust.host_text(s, r)) else []
    if r.totals.steps > 1 and (s.self_time_us_max or s.self_time_us_min):
        out.append(
            f"spread over {fmt.plural(r.totals.steps, 'step')}: {figures.time_us(s.self_time_us_min)}"
            f"–{figures.time_us(s.self_time_us_max)} (median "
            f"{figures.time_us(s.self_time_us_median or s.self_time_us)})"
        )
    out += [t] if (t := rank_format.hover_table(s, clock)) else []  # torchrun: per rank
    if a.previous_us is not None:  # fwd+bwd where the step has backward (runs.line_times)
        change = fmt.delta(a.previous_us, s.time_us) or "n/a"
        what = "fwd + bwd " if r.totals.has_backward else ""
        out.append(
            f"previous run: {what}{figures.time_us(a.previous_us)} → "
            f"{figures.time_us(s.time_us)}{clock} ({change})"
        )
    if s.backward_self_time_us or s.backward_total_time_us or s.recompute_time_us:
        out.append(
            f"backward self **{figures.time_us(s.backward_self_time_us)}{clock}** · total "
            f"{figures.time_us(s.backward_total_time_us)}{clock}"
            + (
                f" · recompute {figures.time_us(s.recompute_time_us)}{clock} (checkpointing: "
                f"forward re-run in the backward)"
                if s.recompute_time_us
                else ""
            )
            + f" · fwd + bwd {figures.time_us(s.time_us)}{clock}"
        )
    hlo = hlo_section(s, clock)  # backend xla: the compiled instructions behind the line
    if hlo:  # (they are the line's ops there: one table, forward then backward)
        out.append(hlo)
    else:
        if s.ops:
            out.append(_op_table("forward ops" if s.backward_ops else None, s.ops, clock))
        if s.backward_ops:
            out.append(_op_table("backward ops (the autograd node that ran them)", s.backward_ops, clock))
        if s.recompute_ops:
            out.append(_op_table("recompute ops", s.recompute_ops, clock))
    out += [w] if (w := roofline_format.hover_section(r, s)) else []  # FLOPs, % of peak, memory
    past = history_section(history or [], r, s)  # the line in the function's last runs
    if past:
        out.append(past)
    on_line = [f for f in annotations.findings if f.line == a.line and f.finding.kind != trust.NOISY]
    if on_line:
        out.append(
            "\n".join(
                f"- **{escape(f.finding.severity)}** ({escape(f.finding.kind)}): {escape(f.finding.message)}"
                + (f" — {escape(f.finding.fix)}" if f.finding.fix else "")
                for f in on_line
            )
        )
    section = trust.hover_section(r)  # reconciled with the wall, calibrated, noisy?
    if section:
        out.append(section)
    windows = [w for lw in r.timeline if lw.file == s.file and lw.line == s.line for w in lw.windows]
    if windows:
        start = min(w.start_us for w in windows)
        end = max(w.start_us + w.dur_us for w in windows)
        out.append(
            # positions on the trace's clock, to the µs (not a cost: no rounding)
            f"trace time: {start:.0f}–{end:.0f} µs ({fmt.plural(len(windows), 'window')}, "
            f"the trace's own clock)"
        )
    links = [command_link("Open timeline", "trainiumLens.openTimeline", [{"uri": uri, "line": a.line}])]
    if r.backend == "neuron" or r.artifacts.neuron_profile_dir:
        links.append(
            command_link(
                "Open in Neuron Explorer", "trainiumLens.openExplorer", [{"uri": uri, "line": a.line}]
            )
        )
    out.append(" · ".join(links) + f" · run {code(r.run_id)} on {escape(r.host)}")
    return "\n\n".join(out)


def _op_table(title: str | None, ops: list, clock: str) -> str:
    backward = any(getattr(op, "node", "") for op in ops)
    rows = [f"**{title}**"] if title else []
    rows += [
        "| op | calls | self | CPU |" + (" node |" if backward else ""),
        "| --- | ---: | ---: | ---: |" + (" --- |" if backward else ""),
    ]
    for op in sorted(ops, key=lambda o: -o.self_time_us):
        node = getattr(op, "node", "")
        rows.append(
            f"| {code(op.name, in_table=True)} | {figures.count(op.calls)} | "
            f"{figures.time_us(op.self_time_us)}{clock} | {figures.time_us(op.self_cpu_us)} |"
            + (f" {escape(node.split('::')[-1])} |" if backward else "")
        )
    return "\n".join(rows)


def hover(ls: LensServer, params: types.HoverParams) -> types.Hover | None:
    uri = params.text_document.uri
    annotations = ls.annotations(uri)
    if annotations is None:
        return None
    a = annotations.by_line.get(params.position.line)
    if a is None:
        return None
    runs = ls.document_runs(uri)
    history = runs.index.history(a.result.function.file, a.result.function.name) if runs else []
    lines, _ = ls.doc_lines(uri)
    end = ls.workspace.position_codec.client_num_units(lines[a.line]) if a.line < len(lines) else 0
    return types.Hover(
        contents=types.MarkupContent(
            kind=types.MarkupKind.Markdown, value=markdown(uri, a, annotations, history)
        ),
        range=types.Range(
            start=types.Position(line=a.line, character=0), end=types.Position(line=a.line, character=end)
        ),
    )


def register(server: LensServer) -> None:
    @server.feature(types.TEXT_DOCUMENT_HOVER)
    def on_hover(ls: LensServer, params: types.HoverParams) -> types.Hover | None:
        return hover(ls, params)

"""The roofline in the editor: the hint's marker and the hover's section.

Hint: ``· 41% peak`` (compute-bound: FLOP/s against the peak of the line's
dtype; also a below-roof line's), ``· mem-bound`` (bytes are the binding
term; ``· 4% BW`` below the roof), or ``· overhead`` (more than 10× the time
its work needs, tiny ops) — short, because VS Code cuts an inlay hint
at 43 characters by default (``editor.inlayHints.maximumLength``); the %
of bandwidth is in the hover. Hover: the roof and its source, the line's
forward and backward points, and its memory.
"""

from __future__ import annotations

from trainium_lens.analysis.roofline.peaks import resolve
from trainium_lens.analysis.roofline.points import above_notes, line_roofs, step_roof
from trainium_lens.lsp.present import format as fmt
from trainium_lens.lsp.present.markdown import escape
from trainium_lens.model import figures
from trainium_lens.model.evidence import Roof
from trainium_lens.model.lines import LineStat
from trainium_lens.model.result import Result


def marker(result: Result, stat: LineStat, roof: Roof | None = None) -> str | None:
    r = step_roof(result, stat, roof)
    if r is None:
        return None
    if r.verdict == "overhead-bound":
        return "overhead"
    if r.verdict == "memory-bound":
        return "mem-bound"
    if r.bound == "memory":  # below the roof on the bandwidth side
        return f"{figures.pct(r.bytes_pct)} BW"
    return f"{figures.pct(r.flops_pct)} peak"


def roof_line(roof: Roof) -> str:
    peaks = ", ".join(f"{figures.flops_rate(p.flops_per_s)} {p.dtype}" for p in roof.flops)
    return (
        f"roof: {peaks}; {figures.bandwidth(roof.bytes_per_s)} — {escape(roof.device)}: {escape(roof.source)}"
    )


def _memory(result: Result, s: LineStat) -> str | None:
    parts = []
    if s.alloc_bytes:
        parts.append(f"allocates {figures.nbytes(s.alloc_bytes)}")
    if s.saved_bytes:
        acts = s.saved_activation_bytes
        extra = (
            f" ({figures.nbytes(acts)} of them activations)"
            if acts is not None and acts != s.saved_bytes
            else ""
        )
        parts.append(f"saves {figures.nbytes(s.saved_bytes)} for backward{extra}")
    mem = result.memory
    if s.peak_bytes and mem is not None and mem.peak_bytes:
        phase = f", in the {escape(mem.peak_phase)}" if mem.peak_phase else ""
        parts.append(
            f"{figures.nbytes(s.peak_bytes)} live at the step's peak "
            f"({figures.nbytes(mem.peak_bytes)} above its start{phase})"
        )
    return "memory: " + " · ".join(parts) if parts else None


def hover_section(result: Result, s: LineStat) -> str | None:
    has_work = any(v for v in (s.flops, s.bytes, s.backward_flops, s.backward_bytes))
    memory = _memory(result, s)
    if not has_work and memory is None:
        return None
    out = [f"**Work and roofline** (per {result.unit}; bytes are an estimate)"]
    roof = resolve(result)
    points = line_roofs(result, s, roof)
    clock = fmt.clock_suffix(result)
    if points:
        rows = [
            "| | FLOPs | bytes | time | FLOP/s | bytes/s | FLOP/B | % of peak | verdict |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
        ]
        for p in points:
            ai = p.intensity
            rows.append(
                f"| {p.phase} | {figures.flops(p.flops)} | {figures.nbytes(p.bytes)} | "
                f"{figures.time_us(p.time_us)}{clock} | {figures.flops_rate(p.flops_per_s)} | "
                f"{figures.bandwidth(p.bytes_per_s)} | {f'{ai:.3g}' if ai is not None else '–'} | "
                f"{figures.pct(p.pct_of_peak)} {'FLOP/s' if p.bound == 'compute' else 'BW'} | {p.verdict} |"
            )
        out.append("\n".join(rows))
        out += [f"_{note}_" for note in above_notes(points)]
    elif has_work:
        out.append(
            f"forward {figures.flops(s.flops or 0)}, {figures.nbytes(s.bytes or 0)} · backward "
            f"{figures.flops(s.backward_flops or 0)}, {figures.nbytes(s.backward_bytes or 0)}"
        )
    if roof is not None:
        out.append(roof_line(roof))
    elif has_work:
        device = result.environment.device_name or result.backend
        out.append(f"no peak known for {escape(device)}: no % of peak")
    if memory:
        out.append(memory)
    return "\n\n".join(out)

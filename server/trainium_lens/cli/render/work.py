"""The CLI's work and roofline section: per line FLOPs (forward + backward),
bytes moved (an estimate), achieved FLOP/s, % of the device's peak and the
verdict; memory: bytes saved for backward and live at the step's peak. The
roof and its source come first: a % is only as good as its peak."""

from __future__ import annotations

from trainium_lens.analysis.roofline.peaks import resolve
from trainium_lens.analysis.roofline.points import above_notes, function_mfu, has_work, step_roof
from trainium_lens.cli.render.text import SOURCE_WIDTH, Style, finish, line_ref, table, truncate
from trainium_lens.model import figures
from trainium_lens.model.result import Result


def render_work(result: Result, style: Style | None = None) -> str:
    """``"\\n\\n" + section`` when the result counted work, else ``""``."""
    style = style or Style()
    lines = [s for s in result.lines if has_work(s) or s.saved_bytes or s.peak_bytes]
    if result.work is None and result.memory is None:
        return ""
    roof = resolve(result)
    out = [
        f"  work and roofline (per {result.unit}; bytes are an estimate: inputs + outputs of each line's ops)"
    ]
    if roof is not None:
        peaks = ", ".join(f"{figures.flops_rate(p.flops_per_s)} {p.dtype}" for p in roof.flops)
        out.append(f"  roof: {peaks}; {figures.bandwidth(roof.bytes_per_s)} ({roof.device}: {roof.source})")
    else:
        out.append(f"  roof: no peak known for {result.environment.device_name or result.backend}")
    mfu = function_mfu(result, roof)
    if mfu is not None:
        out.append(
            f"  function MFU {figures.pct(100 * mfu.mfu)} of the {mfu.dtype} peak: "
            f"{figures.flops(mfu.flops)} per {result.unit} over the {mfu.basis}"
        )
    rows = []
    points = []
    for s in sorted(lines, key=lambda s: (s.file != result.function.file, s.file, s.line)):
        r = step_roof(result, s, roof)
        points += [r] if r is not None else []
        flops = (s.flops or 0.0) + (s.backward_flops or 0.0)
        bytes_ = (s.bytes or 0.0) + (s.backward_bytes or 0.0)
        rows.append(
            [
                line_ref(s, result),
                truncate(s.text, SOURCE_WIDTH, style),
                figures.flops(flops) if flops else "",
                figures.nbytes(bytes_) if bytes_ else "",
                figures.flops_rate(r.flops_per_s) if r and flops else "",
                f"{figures.pct(r.pct_of_peak)} {'FLOP/s' if r.bound == 'compute' else 'BW'}" if r else "",
                r.verdict if r else "",
                figures.nbytes(s.saved_bytes) if s.saved_bytes else "",
                figures.nbytes(s.peak_bytes) if s.peak_bytes else "",
            ]
        )
    if rows:
        out += table(
            ["line", "source", "FLOPs", "bytes", "FLOP/s", "% peak", "verdict", "saved", "at peak"],
            rows,
            "llrrrrlrr",
            width=style.width,
            shrink={1: 16},
            ellipsis=style.ellipsis,
        )
    out += [f"  % peak {note}" for note in above_notes(points)]
    mem = result.memory
    if mem is not None:
        if mem.available:
            phase = f", in the {mem.peak_phase}" if mem.peak_phase else ""
            saved = f"; {figures.nbytes(mem.saved_bytes)} saved for backward" if mem.saved_bytes else ""
            before = (
                f"; {figures.nbytes(mem.held_before_bytes)} held before it"
                if mem.held_before_bytes is not None
                else ""
            )
            out.append(
                f"  memory ({mem.device}): peak {figures.nbytes(mem.peak_bytes)} above the step's start"
                f"{phase}{before}{saved} ({mem.source})"
            )
        elif mem.note:
            out.append(f"  memory: {mem.note}")
    return finish("\n\n" + "\n".join(out), style)

"""Findings: what a result says about the code, as pure functions of a result.

The harness records raw signals and figures; this module judges them. Every
finding points at a source line (the function's ``def`` line when nothing more
precise is known) and says what to do about it.

Thresholds (why these numbers):

* **dispatches** — a line that dispatches ``DISPATCH_MIN`` (2) or more
  compute ops *per execution* (the harness counts how many times each line
  ran, ``LineStat.hits``: ``return F.layer_norm(...)`` reached from five
  LayerNorm modules runs five times with one op each, nothing to fuse)
  *and* holds at least ``DISPATCH_SHARE`` (5 %) of the
  function's primary time (forward + backward). Every dispatch is a separate kernel launch (on
  Neuron eager, roughly a separate NEFF execution), so two elementwise ops on
  one line already pay launch overhead twice; the share floor keeps cheap lines
  from cluttering the editor. View/metadata ops (``view``, ``expand``, ...)
  launch nothing and are not counted. Never on a line whose own cost is
  negligible (under ``NEGLIGIBLE_US``, 1 µs per call, whatever its share), nor
  on a line whose torch calls ran mostly (``LIBRARY_SHARE``) inside code
  outside the user's files (``LineStat.via_library``: ``out = model(x)`` of an
  installed model, ``self.act(x)`` into transformers): the ops to fuse are in
  a file the user does not edit. Such a line can still get a named fused op
  (``analysis/findings/patterns.py``). Only direct ops costing at least
  ``MINOR_OP_SHARE`` (5 %) of the line count (``_weighty``): a ``linear``
  followed by a ``p=0`` dropout that returns its input is one op's work.
* **fused pattern** — a known multi-op idiom (RMSNorm, LayerNorm, tanh GELU,
  softmax, SiLU, SwiGLU, attention) named, with the one op that computes it
  as a candidate: ``analysis/findings/patterns.py`` says when.

No finding here claims a benefit it did not measure: a fused op or
``torch.compile`` can be slower on a backend (the bundled RMSNorm example:
``torch.rms_norm`` 0.92–0.95× and the compiled variant 0.54–0.57× of the op-by-op
version on CPU), so the dispatch, pattern and roofline findings state what was
observed and say the fix is untested; ``trainium-lens fix`` measures a fix that
can be written as an edit (``docs/fixes.md``).
* **instrumentation overhead** — reported when line labelling made a call more
  than ``OVERHEAD_RATIO`` (10×) slower than a plain call. Op times exclude the
  labelling (it runs between ops), so this is a hint about the timeline's
  spacing, not about the figures; tiny CPU ops routinely show 2–6×.
* host→device copies, CPU fallback, missing device time, compiles or
  recompiles inside measured steps — reported whenever they occur: each one
  means the numbers or the code are not what the user thinks.

Severity by kind: ``warning`` for what distorts the figures or costs the most
(missing device time, CPU fallback, compile in measured steps, host→device
copies); ``info`` for a named candidate (fused pattern) and graph breaks; ``hint``
for the generic dispatch count and the instrumentation note.
"""

from __future__ import annotations

from collections.abc import Callable

from trainium_lens.analysis.findings.ops import (
    VIEW_OPS,
    direct_ops,
    dispatch_text,
    dispatches_per_execution,
    finding,
    line_share,
    op_base,
)
from trainium_lens.analysis.findings.optimizer import with_optimizer_findings
from trainium_lens.analysis.findings.ranks import rank_findings
from trainium_lens.analysis.noise import with_noise_findings
from trainium_lens.model import figures
from trainium_lens.model.lines import LineOp, LineStat
from trainium_lens.model.result import Finding, Result

DISPATCH_MIN = 2
DISPATCH_SHARE = 0.05
OVERHEAD_RATIO = 10.0
NEGLIGIBLE_US = 1.0  # a line costing less per call has nothing a fusion could save
LIBRARY_SHARE = 0.5  # most of the line's torch calls ran in library code: no dispatch hint
MINOR_OP_SHARE = 0.05  # a direct op costing less of its line's time is not worth a fusion


def analyze(
    result: Result, edits: Callable[[Result, list[Finding]], list[Finding]] | None = None
) -> list[Finding]:
    """Every finding for one result, most severe first, then by line. ``edits`` adds
    the fixes that can be written as edits (``analysis/fixes/attach.py``, given the
    source by the engine) before a noisy run's timing findings are withheld: a fix
    is measured on its own by ``trainium-lens fix``, so it stays offered."""
    findings: list[Finding] = []
    from trainium_lens.analysis.findings.data_wait import data_wait_findings
    from trainium_lens.analysis.findings.neuron import neuron_findings
    from trainium_lens.analysis.findings.patterns import pattern_findings
    from trainium_lens.analysis.findings.roofline import with_roofline_findings
    from trainium_lens.analysis.findings.xla import xla_findings

    for check in (
        _device_time,
        _cpu_fallback,
        _compiles,
        _h2d_copies,
        _rt_inspect,
        pattern_findings,  # fused-op patterns: analysis/findings/patterns.py
        _dispatches,
        _overhead,
        xla_findings,
        neuron_findings,
        data_wait_findings,  # a run's `for batch in loader:` line: analysis/findings/data_wait.py
    ):
        findings.extend(check(result))
    findings = with_optimizer_findings(result, findings)
    findings = with_roofline_findings(result, findings)  # overhead/memory-bound lines, checkpointing
    findings.extend(rank_findings(result))  # torchrun jobs: the straggler
    if edits is not None:
        findings = edits(result, findings)
    findings = with_noise_findings(result, findings)  # noisy: timing-based ones withheld
    order = {"error": 0, "warning": 1, "info": 2, "hint": 3}
    findings.sort(key=lambda f: (order.get(f.severity, 9), f.file, f.line, f.kind))
    return findings


def _def_line(result: Result) -> tuple[str, int]:
    return result.function.file, result.function.line


def _device_time(result: Result) -> list[Finding]:
    if result.backend in ("cpu", "xla") or result.signals.device_time_reported:
        return []  # xla: analysis/findings/xla.py says it in its own words
    file, line = _def_line(result)
    why = (
        "missing torch.neuron.synchronize() in the step, or a torch-neuronx build that "
        "puts no device time into the trace"
        if result.backend == "neuron"
        else "no CUDA kernel time in the trace (CUPTI unavailable?)"
    )
    return [
        finding(
            "no_device_time",
            file,
            line,
            f"No {result.backend} device time was reported: every figure falls back to CPU time ({why}).",
            fix="run `trainium-lens doctor` on the host",
        )
    ]


def _cpu_fallback(result: Result) -> list[Finding]:
    found = []
    for op in result.signals.cpu_fallback_ops:
        file, line = _line_of_op(result, op) or _def_line(result)
        found.append(
            finding(
                "cpu_fallback",
                file,
                line,
                f"{op} fell back to CPU: it runs on the host, with copies to and from the device around it.",
                fix="use an op the device supports, or move this step out of the hot path",
            )
        )
    return found


def _line_of_op(result: Result, op_name: str) -> tuple[str, int] | None:
    wanted = op_base(op_name)
    for stat in sorted(result.lines, key=lambda s: -s.self_time_us):
        if any(op.name == op_name or op_base(op.name) == wanted for op in stat.ops):
            return stat.file, stat.line
    return None


def _compiles(result: Result) -> list[Finding]:
    if result.backend == "xla":
        return []  # a compiled graph's own words: analysis/findings/xla.py
    signals = result.signals
    file, line = _def_line(result)
    protocol = result.function.protocol
    found = []
    if signals.compiles_in_active_steps > 0:
        n = signals.compiles_in_active_steps
        found.append(
            finding(
                "compile_in_steps",
                file,
                line,
                f"{n} compile{'s' if n != 1 else ''} happened inside the measured steps: "
                f"the figures include compile time.",
                fix=f"raise warmup (now {protocol.warmup}): warmup={protocol.warmup + 2} in the "
                f"marker comment, or --warmup {protocol.warmup + 2}",
            )
        )
    if signals.recompiles > 0:
        n = signals.recompiles
        found.append(
            finding(
                "recompile",
                file,
                line,
                f"{n} recompile{'s' if n != 1 else ''} after the first compile: inputs change "
                f"shape or a guard fails each call.",
                fix="keep input shapes fixed, or mark dynamic dimensions",
            )
        )
    if signals.graph_breaks > 0:
        n = signals.graph_breaks
        found.append(
            finding(
                "graph_break",
                file,
                line,
                f"{n} graph break{'s' if n != 1 else ''}: the compiled function runs as "
                f"{n + 1} graphs with eager code between them.",
                fix="compile with fullgraph=True to see where it breaks",
            )
        )
    return found


def _h2d_copies(result: Result) -> list[Finding]:
    signals = result.signals
    by_line: dict[tuple[str, int], tuple[float, float]] = {}
    for copy in signals.h2d_copies:
        calls, time = by_line.get((copy.file, copy.line), (0.0, 0.0))
        by_line[(copy.file, copy.line)] = (calls + copy.calls, time + copy.self_time_us)
    for src in signals.h2d_copy_lines:
        by_line.setdefault((src.file, src.line), (0.0, 0.0))
    found = []
    for (file, line), (calls, time) in sorted(by_line.items()):
        per = f" ({calls:g} per call, {figures.time_us(time)})" if calls else ""
        found.append(
            finding(
                "h2d_copy",
                file,
                line,
                f"Host→device copy on this line{per}: a CPU tensor or Python value is moved "
                f"to the device on every call.",
                fix="create it on the device once (device=...), or pass a plain Python number",
            )
        )
    return found


def _rt_inspect(result: Result) -> list[Finding]:
    if not result.signals.neuron_rt_inspect_clash:
        return []
    file, line = _def_line(result)
    return [
        finding(
            "neuron_rt_inspect",
            file,
            line,
            "NEURON_RT_INSPECT_ENABLE is set: it conflicts with torch.profiler and can "
            "empty the device trace.",
            fix="unset NEURON_RT_INSPECT_ENABLE for profiling",
        )
    ]


def _dispatches(result: Result) -> list[Finding]:
    if result.backend == "xla":
        return []  # a line's HLO instructions are not dispatches: one graph runs per step
    found = []
    for stat in sorted(result.lines, key=lambda s: (s.file, s.line)):
        n = dispatches_per_execution(stat)
        share = line_share([stat], result)
        if n < DISPATCH_MIN or (share is not None and share < DISPATCH_SHARE):
            continue
        if stat.time_us < NEGLIGIBLE_US or (stat.via_library or 0.0) >= LIBRARY_SHARE:
            continue  # nothing to save, or the ops are in a file the user does not edit
        weighty = _weighty(stat, result)
        if weighty is not None:
            n = sum(o.direct_calls or o.calls for o in weighty) / (stat.hits or 1)
            if n < DISPATCH_MIN:
                continue  # one op does the work; the others cost next to nothing to fuse away
        names = [
            op_base(o.name) for o in (weighty or direct_ops(stat, result)) if op_base(o.name) not in VIEW_OPS
        ]
        ran = f", each of its {stat.hits:g} runs per call" if stat.hits and stat.hits > 1 else ""
        shown = ", ".join(dict.fromkeys(names)) or "ops"
        found.append(
            finding(
                "dispatches",
                stat.file,
                stat.line,
                f"{dispatch_text(n)} on this line ({shown}{ran}): each one is a separate launch; "
                f"whether fusing them (a fused op, torch.compile) is faster is untested here.",
                candidate="torch.compile",
            )
        )
    return found


def _weighty(stat: LineStat, result: Result) -> list[LineOp] | None:
    """The line's direct compute ops that cost something: each one's time with
    what ran inside it (the op table's total per call, an average over the
    function, times the line's calls of it) at least ``MINOR_OP_SHARE`` of the
    line's. ``self.resid_dropout(self.c_proj(y))`` with ``p=0`` dispatches a
    ``linear`` doing all the work and a ``dropout`` that returns its input:
    nothing to fuse. None when the result has no op table to tell."""
    per_call = {o.name: o.total_time_us / o.calls for o in result.ops if o.calls}
    if not per_call or stat.self_time_us <= 0:
        return None
    direct = [o for o in direct_ops(stat, result) if op_base(o.name) not in VIEW_OPS]
    return [
        o
        for o in direct
        if per_call.get(o.name, o.self_time_us / max(o.calls, 1.0)) * (o.direct_calls or o.calls)
        >= MINOR_OP_SHARE * stat.self_time_us
    ]


def _overhead(result: Result) -> list[Finding]:
    ratio = result.signals.instrumentation_overhead
    if ratio is None or ratio <= OVERHEAD_RATIO:
        return []
    file, line = _def_line(result)
    return [
        finding(
            "instrumentation_overhead",
            file,
            line,
            f"Line labelling made each call {ratio:.1f}× slower than a plain call: op times "
            f"exclude it, but the gaps between ops on the timeline are stretched (the "
            f"unprofiled wall time is not affected).",
        )
    ]

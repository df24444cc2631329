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
  function's primary time. Every dispatch is a separate kernel launch (on
  Neuron eager, roughly a separate NEFF execution), so two elementwise ops on
  one line already pay launch overhead twice; the share floor keeps cheap lines
  from cluttering the editor. View/metadata ops (``view``, ``expand``, ...)
  launch nothing and are not counted.
* **fused pattern** — a known multi-op idiom within one function (RMSNorm,
  LayerNorm, softmax, SiLU) whose ops account for ``PATTERN_SHARE`` (20 %) or
  more of the function's time: named with the fused op that replaces it.
* **fused pattern** also needs ``PATTERN_MIN_DISPATCHES`` (3) dispatches: a
  function that already calls the fused op dispatches one.
* **instrumentation overhead** — reported when line labelling made a call more
  than ``OVERHEAD_RATIO`` (10×) slower than a plain call. Op times exclude the
  labelling (it runs between ops), so this is a hint about the timeline's
  spacing, not about the figures; tiny CPU ops routinely show 2–6×.
* host→device copies, CPU fallback, missing device time, compiles or
  recompiles inside measured steps — reported whenever they occur: each one
  means the numbers or the code are not what the user thinks.

Severity by kind: ``warning`` for what distorts the figures or costs the most
(missing device time, CPU fallback, compile in measured steps, host→device
copies); ``info`` for a named fix (fused pattern) and graph breaks; ``hint``
for the generic dispatch count and the instrumentation note.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass

from trainium_lens.analysis.noise import with_noise_findings
from trainium_lens.analysis.optimizer_findings import with_optimizer_findings
from trainium_lens.analysis.rank_findings import rank_findings
from trainium_lens.model.result import Finding, LineOp, LineStat, Result

DISPATCH_MIN = 2
DISPATCH_SHARE = 0.05
PATTERN_SHARE = 0.20
OVERHEAD_RATIO = 10.0
PATTERN_MIN_DISPATCHES = 3

SEVERITY = {
    "no_device_time": "warning",
    "cpu_fallback": "warning",
    "compile_in_steps": "warning",
    "recompile": "warning",
    "h2d_copy": "warning",
    "neuron_rt_inspect": "warning",
    "fused_op": "info",
    "graph_break": "info",
    "dispatches": "hint",
    "instrumentation_overhead": "hint",
}

# Ops that only change metadata: no kernel, nothing to fuse.
VIEW_OPS = frozenset(
    {
        "view",
        "reshape",
        "_reshape_alias",
        "_unsafe_view",
        "expand",
        "expand_as",
        "t",
        "transpose",
        "permute",
        "unsqueeze",
        "squeeze",
        "as_strided",
        "slice",
        "select",
        "alias",
        "detach",
        "lift_fresh",
        "empty",
        "empty_like",
        "empty_strided",
        "resolve_conj",
        "resolve_neg",
        "contiguous",
        "flatten",
        "unflatten",
        "narrow",
        "split",
        "chunk",
        "unbind",
        "result_type",
        "is_nonzero",
        "item",
        "_local_scalar_dense",
    }
)

# Ops that usually run *inside* another op (dtype casts, output allocation).
HELPER_OPS = frozenset(
    {
        "to",
        "_to_copy",
        "copy",
        "empty",
        "empty_like",
        "empty_strided",
        "fill",
        "zero",
        "resize",
        "clone",
        "contiguous",
    }
)


@dataclass(frozen=True)
class Pattern:
    name: str
    needs: tuple[frozenset[str], ...]  # each: at least one of these ops present
    fix: str
    message: str


# Checked in order; the first that matches a function wins (LayerNorm before
# RMSNorm: LayerNorm also has mean, add, rsqrt and mul).
PATTERNS = (
    Pattern(
        "layer_norm",
        (
            frozenset({"mean"}),
            frozenset({"sub"}),
            frozenset({"rsqrt", "sqrt"}),
            frozenset({"var", "pow", "mul"}),
            frozenset({"mul", "div"}),
        ),
        "torch.nn.functional.layer_norm",
        "compute LayerNorm op by op",
    ),
    Pattern(
        "rms_norm",
        (
            frozenset({"mean"}),
            frozenset({"mul", "pow", "square"}),
            frozenset({"add"}),
            frozenset({"rsqrt", "sqrt", "reciprocal"}),
        ),
        "torch.rms_norm",
        "compute RMSNorm op by op",
    ),
    Pattern(
        "softmax",
        (frozenset({"exp"}), frozenset({"sum"}), frozenset({"div"})),
        "torch.softmax",
        "compute softmax op by op",
    ),
    Pattern(
        "silu",
        (frozenset({"sigmoid"}), frozenset({"mul"})),
        "torch.nn.functional.silu",
        "compute SiLU op by op",
    ),
)


def op_base(name: str) -> str:
    """``aten::mul_`` -> ``mul``; ``aten::add.Tensor`` -> ``add``."""
    base = name.split("::", 1)[-1].split(".", 1)[0]
    return base.rstrip("_") if base != "_" else base


def line_dispatches(line: LineStat) -> float:
    """Ops dispatched directly from ``line`` per call (the harness's count)."""
    if line.calls:
        return line.calls
    return sum(op.calls for op in line.ops if op_base(op.name) not in VIEW_OPS)


def dispatches_per_execution(line: LineStat) -> float:
    """Compute ops the line dispatches each time it runs: its direct ops other
    than views (which launch nothing), divided by its hits. Results without
    hits (older harnesses) count per call, as before."""
    direct = [op for op in line.ops if op.direct_calls > 0]
    if direct:
        n = sum(op.direct_calls for op in direct if op_base(op.name) not in VIEW_OPS)
    else:
        n = line_dispatches(line)
    return n / line.hits if line.hits else n


def direct_ops(line: LineStat, result: Result) -> list[LineOp]:
    """The ops the line itself dispatched.

    ``line.ops`` also lists what those ops called inside (``aten::mean`` on a
    bf16 CPU tensor runs ``sum``, ``div_``, ``to``...). The harness marks the
    direct ones (``direct_calls``, in program order). For results written
    before it did, a best guess: a direct op spans its nested ones, so it has
    the largest total time per call: walk the line's ops in that order
    (helpers such as ``to``/``copy_``/``empty`` and ``_private`` ops, which are
    almost always nested, last) until ``line.calls`` dispatches are covered.
    """
    marked = [op for op in line.ops if op.direct_calls > 0]
    if marked:
        return marked
    totals = {op.name: op.total_time_us / op.calls for op in result.ops if op.calls}

    def rank(op: LineOp) -> tuple[bool, float]:
        base = op_base(op.name)
        helper = base in HELPER_OPS or base in VIEW_OPS or base.startswith("_")
        return (helper, -totals.get(op.name, op.self_time_us / max(op.calls, 1.0)))

    want = line.calls or float("inf")
    picked: list[LineOp] = []
    covered = 0.0
    for op in sorted(line.ops, key=rank):
        if covered >= want:
            break
        picked.append(op)
        covered += op.calls
    return picked


def analyze(result: Result) -> list[Finding]:
    """Every finding for one result, most severe first, then by line."""
    findings: list[Finding] = []
    from trainium_lens.analysis.xla_findings import xla_findings

    for check in (
        _device_time,
        _cpu_fallback,
        _compiles,
        _h2d_copies,
        _rt_inspect,
        _patterns,
        _dispatches,
        _overhead,
        xla_findings,
    ):
        findings.extend(check(result))
    findings = with_optimizer_findings(result, findings)
    findings.extend(rank_findings(result))  # torchrun jobs: the straggler
    findings = with_noise_findings(result, findings)  # noisy: timing-based ones withheld
    order = {"error": 0, "warning": 1, "info": 2, "hint": 3}
    findings.sort(key=lambda f: (order.get(f.severity, 9), f.file, f.line, f.kind))
    return findings


def _finding(kind: str, file: str, line: int, message: str, fix: str | None = None) -> Finding:
    return Finding(kind=kind, severity=SEVERITY[kind], file=file, line=line, message=message, fix=fix)


def _def_line(result: Result) -> tuple[str, int]:
    return result.function.file, result.function.line


def _device_time(result: Result) -> list[Finding]:
    if result.backend in ("cpu", "xla") or result.signals.device_time_reported:
        return []  # xla: analysis/xla_findings.py says it in its own words
    file, line = _def_line(result)
    why = (
        "missing torch.neuron.synchronize() in the step, or a torch-neuronx build that "
        "puts no device time into the trace"
        if result.backend == "neuron"
        else "no CUDA kernel time in the trace (CUPTI unavailable?)"
    )
    return [
        _finding(
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
            _finding(
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
    signals = result.signals
    file, line = _def_line(result)
    protocol = result.function.protocol
    found = []
    if signals.compiles_in_active_steps > 0:
        n = signals.compiles_in_active_steps
        found.append(
            _finding(
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
            _finding(
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
            _finding(
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
        per = f" ({calls:g} per call, {_us(time)})" if calls else ""
        found.append(
            _finding(
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
        _finding(
            "neuron_rt_inspect",
            file,
            line,
            "NEURON_RT_INSPECT_ENABLE is set: it conflicts with torch.profiler and can "
            "empty the device trace.",
            fix="unset NEURON_RT_INSPECT_ENABLE for profiling",
        )
    ]


def _function_total(result: Result) -> float:
    return result.totals.self_time_us or sum(s.self_time_us for s in result.lines) or 0.0


def _share(stats: list[LineStat], result: Result) -> float | None:
    """The lines' share of the function's time, by medians over the measured
    steps where the result has them: one preempted step (a busy machine) must
    not make every other line look negligible."""
    per_step = result.totals.per_step_self_time_us
    if per_step and all(s.self_time_us_median for s in stats):
        total = statistics.median(per_step)
        part = sum(s.self_time_us_median for s in stats)
    else:
        total = _function_total(result)
        part = sum(s.self_time_us for s in stats)
    return part / total if total > 0 else None


def _patterns(result: Result) -> list[Finding]:
    by_function: dict[str, list[LineStat]] = defaultdict(list)
    for stat in result.lines:
        by_function[stat.function or result.function.name].append(stat)
    found = []
    for function, stats in by_function.items():
        direct = {s.line: {op_base(o.name) for o in direct_ops(s, result)} for s in stats}
        present = set().union(*direct.values())
        for pattern in PATTERNS:
            if not all(present & need for need in pattern.needs):
                continue
            wanted = frozenset().union(*pattern.needs)
            involved = sorted((s for s in stats if direct[s.line] & wanted), key=lambda s: s.line)
            dispatches = sum(dispatches_per_execution(s) for s in involved)
            time = sum(s.self_time_us for s in involved)
            share = _share(involved, result)
            if dispatches < PATTERN_MIN_DISPATCHES or (share is not None and share < PATTERN_SHARE):
                break
            first, last = involved[0].line, involved[-1].line
            where = f"lines {first}–{last}" if first != last else f"line {first}"
            found.append(
                _finding(
                    "fused_op",
                    involved[0].file,
                    first,
                    f"{where} of {function}() {pattern.message}: {_dispatch_text(dispatches)} "
                    f"per {'execution' if any((s.hits or 1) > 1 for s in involved) else 'call'}, "
                    f"{_us(time)}; {pattern.fix} does it in one fused op.",
                    fix=pattern.fix,
                )
            )
            break
    return found


def _us(value: float) -> str:
    return f"{value / 1000:.3g} ms" if value >= 1000 else f"{value:.3g} µs"


def _dispatch_text(n: float) -> str:
    return f"{n:g} dispatch" + ("" if n == 1 else "es")


def _dispatches(result: Result) -> list[Finding]:
    found = []
    for stat in sorted(result.lines, key=lambda s: (s.file, s.line)):
        n = dispatches_per_execution(stat)
        share = _share([stat], result)
        if n < DISPATCH_MIN or (share is not None and share < DISPATCH_SHARE):
            continue
        names = [op_base(o.name) for o in direct_ops(stat, result) if op_base(o.name) not in VIEW_OPS]
        ran = f", each of its {stat.hits:g} runs per call" if stat.hits and stat.hits > 1 else ""
        shown = ", ".join(dict.fromkeys(names)) or "ops"
        found.append(
            _finding(
                "dispatches",
                stat.file,
                stat.line,
                f"{_dispatch_text(n)} on this line ({shown}{ran}): a fused op or torch.compile "
                f"would make it one.",
                fix="torch.compile",
            )
        )
    return found


def _overhead(result: Result) -> list[Finding]:
    ratio = result.signals.instrumentation_overhead
    if ratio is None or ratio <= OVERHEAD_RATIO:
        return []
    file, line = _def_line(result)
    return [
        _finding(
            "instrumentation_overhead",
            file,
            line,
            f"Line labelling made each call {ratio:.1f}× slower than a plain call: op times "
            f"exclude it, but the gaps between ops on the timeline are stretched (the "
            f"unprofiled wall time is not affected).",
        )
    ]

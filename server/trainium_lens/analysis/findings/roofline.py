"""Findings from the roofline and the memory figures, each one checked against
the figures of the code it names (``analysis/roofline/points.py``, ``peaks.py``):

* ``overhead_bound`` (info) — a line that takes more than ten times what its
  work needs on this device (roofline efficiency < 10 %) in tiny ops, two or
  more per execution, and holds at least ``SHARE`` (5 %) of the step: its time
  goes to launching and dispatching, not to compute or memory. It names the
  ops per execution and the time per op, and replaces the generic
  ``dispatches`` hint on the same line (same advice, with the roofline's figures).
* ``below_roof`` (info) — a line with FLOPs as far below its compute roof whose
  ops are not tiny (``roofline.TINY_OP_US``): not launch overhead; the op itself
  runs slowly here (a busy host, a slow kernel for these shapes or dtype, a peak
  that does not apply). Not for byte-only lines: their elementwise math counts
  0 FLOPs, so their bandwidth roof can be far too optimistic. Same share floor.
* ``memory_bound`` (info) — a memory-bound line (≥ 10 % of its roof, bytes the
  binding term) with two or more elementwise dispatches per execution and the
  same share: each op reads and writes the tensor again. A one-op equivalent is
  named as a candidate, untested, when the line's own ops spell one out
  (``LINE_FUSIONS``: tanh-GELU, SiLU, softmax, RMSNorm). It too replaces the
  line's ``dispatches`` hint. A line a ``fused_op`` pattern covers (the fix
  named, with its measured figures) gets neither this nor ``overhead_bound``.
* ``checkpoint`` (info) — in a training step, a user function other than the
  profiled one whose lines keep ``CHECKPOINT_SHARE`` (25 %) or more of the
  step's memory peak as activations saved for backward, and that is not
  checkpointed already (no recompute time): ``torch.utils.checkpoint`` keeps
  only its inputs and re-runs its forward in the backward. The recompute's cost
  is not estimated (the lines' forward time read 1.1–1.6× below what
  checkpointing really added on a tiny Llama step): untested here.

None of them names a benefit: the roofline says where the time goes, not that a
fused op or torch.compile would be faster there (on a tiny Llama step on CPU,
compiling the loss its memory-bound line pointed at made the step 3.5–6.3 % slower).
"""

from __future__ import annotations

import statistics
from collections import defaultdict

from trainium_lens.analysis.findings.ops import VIEW_OPS, direct_ops, dispatches_per_execution, op_base
from trainium_lens.analysis.findings.patterns import pattern_lines
from trainium_lens.analysis.roofline.peaks import resolve
from trainium_lens.analysis.roofline.points import line_time_us, step_roof
from trainium_lens.model import figures
from trainium_lens.model.evidence import Roof
from trainium_lens.model.lines import LineStat
from trainium_lens.model.result import Finding, Result

SHARE = 0.05
CHECKPOINT_SHARE = 0.25
MATMUL_OPS = frozenset({"mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "conv2d", "convolution"})


# A line's own ops that spell out one fused op (checked against its direct ops only)
LINE_FUSIONS = (
    (frozenset({"tanh", "pow", "mul", "add"}), 'torch.nn.functional.gelu(x, approximate="tanh")'),
    (frozenset({"erf", "mul", "add"}), "torch.nn.functional.gelu(x)"),
    (frozenset({"sigmoid", "mul"}), "torch.nn.functional.silu"),
    (frozenset({"exp", "sum", "div"}), "torch.softmax"),
    (frozenset({"pow", "mean", "rsqrt", "mul"}), "torch.rms_norm"),
)


def _share(stat: LineStat, result: Result) -> float:
    """The line's share of the step, medians on both sides (one preempted step on a
    busy host must not shrink every other line's share)."""
    per_step = result.totals.per_step_self_time_us
    total = statistics.median(per_step) if per_step else result.totals.self_time_us
    return line_time_us(stat) / total if total > 0 else 0.0


def _ops_text(stat: LineStat, result: Result) -> tuple[float, str]:
    n = dispatches_per_execution(stat)
    names = [op_base(o.name) for o in direct_ops(stat, result) if op_base(o.name) not in VIEW_OPS]
    return n, ", ".join(dict.fromkeys(names)) or "ops"


def _below_roof(result: Result, stat: LineStat, roof: Roof) -> Finding | None:
    r = step_roof(result, stat, roof)
    # only against a FLOP count: elementwise math (gelu's erf, exp) is 0 FLOPs by this
    # definition, so a byte-only line's bandwidth roof can be far too optimistic
    if r is None or r.verdict != "below-roof" or r.bound != "compute" or _share(stat, result) < SHARE:
        return None
    n, names = _ops_text(stat, result)
    what = f"{r.dtype} peak" if r.bound == "compute" else "memory bandwidth"
    return Finding(
        kind="below_roof",
        severity="info",
        file=stat.file,
        line=stat.line,
        message=(
            f"Far below the roof: {names} run{'s' if n == 1 else ''} at {figures.pct(r.pct_of_peak)} of the "
            f"{what} ({figures.time_us(r.time_us)} per call where the roof allows "
            f"{figures.time_us(r.roof_us)}); the ops are not "
            f"tiny, so not launch overhead: a busy host, a slow kernel for these shapes or dtype, or "
            f"a peak that does not apply here."
        ),
    )


def _overhead(result: Result, stat: LineStat, roof: Roof) -> Finding | None:
    r = step_roof(result, stat, roof)
    if r is None or r.verdict != "overhead-bound" or _share(stat, result) < SHARE:
        return None
    n, names = _ops_text(stat, result)
    if n < 2:  # one op per execution: nothing to fuse on this line
        return None
    per_op = r.time_us / max(n * (stat.hits or 1), 1)
    ops = f"{n:g} op{'s' if n != 1 else ''} per execution ({names})"
    return Finding(
        kind="overhead_bound",
        severity="info",
        file=stat.file,
        line=stat.line,
        message=(
            f"Overhead-bound: {ops} take {figures.time_us(r.time_us)} per call where this device needs "
            f"{figures.time_us(r.roof_us)} for their work ({figures.pct(100 * r.efficiency)} of the roof; "
            f"~{figures.time_us(per_op)} per op): launches and dispatch set the time, not compute or memory. "
            f"Fusing them or giving each op more work is untested here."
        ),
        candidate="torch.compile",
    )


def _memory_bound(result: Result, stat: LineStat, roof: Roof) -> Finding | None:
    r = step_roof(result, stat, roof)
    if r is None or r.verdict != "memory-bound" or _share(stat, result) < SHARE:
        return None
    n, names = _ops_text(stat, result)
    elementwise = [op for op in names.split(", ") if op not in MATMUL_OPS]
    if n < 2 or len(elementwise) < 2:
        return None
    own = {op_base(o.name) for o in direct_ops(stat, result)}
    fix = next((f for ops, f in LINE_FUSIONS if ops <= own), None)
    alternative = (
        f"{fix} computes the same in one op, untested here"
        if fix
        else "whether a fused kernel (torch.compile) is faster is untested here"
    )
    return Finding(
        kind="memory_bound",
        severity="info",
        file=stat.file,
        line=stat.line,
        message=(
            f"Memory-bound: {n:g} elementwise dispatches per execution ({names}) move "
            f"{figures.nbytes(r.bytes)} per call at {figures.bandwidth(r.bytes_per_s)} "
            f"({figures.pct(r.bytes_pct)} of the bandwidth); each reads and writes the data again: "
            f"{alternative}."
        ),
        candidate=fix or "torch.compile",
    )


def _checkpoint(result: Result) -> list[Finding]:
    mem = result.memory
    if mem is None or not mem.available or not mem.peak_bytes or not result.totals.has_backward:
        return []
    by_fn: dict[str, list[LineStat]] = defaultdict(list)
    for s in result.lines:
        if s.function and s.function != result.function.name:
            by_fn[s.function].append(s)
    found = []
    for fn, stats in sorted(by_fn.items()):
        saved = sum(s.saved_activation_bytes or 0.0 for s in stats)
        if saved < CHECKPOINT_SHARE * mem.peak_bytes or any(s.recompute_time_us for s in stats):
            continue
        top = max(stats, key=lambda s: s.saved_activation_bytes or 0.0)
        found.append(
            Finding(
                kind="checkpoint",
                severity="info",
                file=top.file,
                line=top.line,
                message=(
                    f"{fn}() keeps {figures.nbytes(saved)} of activations for backward "
                    f"({figures.pct(100 * saved / mem.peak_bytes)} of the step's "
                    f"{figures.nbytes(mem.peak_bytes)} peak); checkpointing it keeps only its inputs "
                    f"and re-runs its forward in the backward: what that recompute costs is untested here."
                ),
                fix="torch.utils.checkpoint.checkpoint(fn, ..., use_reentrant=False)",
            )
        )
    return found


def with_roofline_findings(result: Result, findings: list[Finding]) -> list[Finding]:
    """``findings`` plus these; a line's ``dispatches`` hint gives way to its
    ``overhead_bound`` or ``memory_bound`` finding (the same advice, with figures)."""
    roof = resolve(result)
    if roof is None and result.memory is None:
        return findings
    # the lines a fused-op pattern covers (patterns.py names the fix, with its
    # measured figures) are not told the same thing again as memory- or overhead-bound
    fused = pattern_lines(result)
    added: list[Finding] = []
    # a line the optimizer finding speaks for (its loops, its measured implementations) needs no second word
    said = {(f.file, f.line) for f in findings if f.kind in ("optimizer_loop", "optimizer_choice")}
    if roof is not None:
        for stat in result.lines:
            if (stat.file, stat.line) in said:
                continue
            if result.backend == "xla" or (stat.file, stat.line) in fused:
                # xla: a compiled graph ("fuse or compile" is no advice there); a named pattern
                finding = _below_roof(result, stat, roof)
            else:
                finding = (
                    _overhead(result, stat, roof)
                    or _below_roof(result, stat, roof)
                    or _memory_bound(result, stat, roof)
                )
            if finding is not None:
                added.append(finding)
    added += _checkpoint(result)
    replaced = {(f.file, f.line) for f in added if f.kind in ("overhead_bound", "memory_bound")}
    kept = [f for f in findings if not (f.kind == "dispatches" and (f.file, f.line) in replaced)]
    return kept + added

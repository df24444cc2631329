"""The findings' vocabulary: severities, which ops launch work, dispatch counts,
a line's share of a step. Each kind of finding builds on it; it imports none of
them (so no finding module needs another's private names)."""

from __future__ import annotations

import statistics

from trainium_lens.model.lines import LineOp, LineStat
from trainium_lens.model.result import Finding, Result

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


def finding(
    kind: str, file: str, line: int, message: str, fix: str | None = None, candidate: str | None = None
) -> Finding:
    return Finding(
        kind=kind,
        severity=SEVERITY[kind],
        file=file,
        line=line,
        message=message,
        fix=fix,
        candidate=candidate,
    )


def function_total(result: Result) -> float:
    return result.totals.self_time_us or sum(s.self_time_us for s in result.lines) or 0.0


def line_share(stats: list[LineStat], result: Result) -> float | None:
    """The lines' share of the function's time (forward + backward + recompute:
    what they cost a step), by medians over the measured steps where the result
    has them: one preempted step (a busy machine) must not make every other
    line look negligible."""
    per_step = result.totals.per_step_self_time_us
    if per_step and all(s.self_time_us_median for s in stats):
        total = statistics.median(per_step)
        part = sum(
            s.self_time_us_median
            + (s.backward_self_time_us_median or s.backward_self_time_us)
            + s.recompute_time_us
            for s in stats
        )
    else:
        total = function_total(result)
        part = sum(s.time_us for s in stats)
    return part / total if total > 0 else None


def dispatch_text(n: float) -> str:
    return f"{n:g} dispatch" + ("" if n == 1 else "es")

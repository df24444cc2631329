"""Optimizer findings: an optimizer step that dispatches per-parameter loops.

``torch.optim`` optimizers have three implementations of ``step``: a Python loop
over the parameters (``foreach=False``, the default for CPU tensors), one
``_foreach_*`` op per update term over all parameters (``foreach=True``), and
one fused kernel (``fused=True``). The result records each optimizer range
(``Optimizer.step#AdamW.step``) with the ops dispatched inside it; a step that
dispatched many ops and not one ``_foreach_``/``_fused_`` op ran the loop.
"""

from __future__ import annotations

from trainium_lens.model.result import Finding, Result

LOOP_MIN_OPS = 24  # fewer ops per step: too few parameters for the loop to matter
KIND = "optimizer_loop"


def optimizer_findings(result: Result) -> list[Finding]:
    if result.backend == "xla":
        # a compiled graph: the loop is traced once into the graph and fused by the
        # compiler; how many ops Python issued costs nothing per step
        return []
    found = []
    for opt in result.optimizers:
        if not opt.name.startswith("Optimizer.step#") or opt.fused_ops or opt.ops < LOOP_MIN_OPS:
            continue
        cls = opt.name.split("#", 1)[1].rsplit(".", 1)[0]
        time = (
            f", {opt.self_time_us / 1000:.3g} ms"
            if opt.self_time_us >= 1000
            else (f", {opt.self_time_us:.3g} µs" if opt.self_time_us else "")
        )
        found.append(
            Finding(
                kind=KIND,
                severity="warning",
                file=opt.file,
                line=opt.line,
                message=f"{cls}.step dispatched {opt.ops:g} ops per step{time} in per-parameter "
                f"loops (no _foreach_/_fused_ op): foreach=True runs each update term as "
                f"one _foreach_ op over all parameters, fused=True as one kernel.",
                fix=f"{cls}(..., foreach=True) or fused=True",
            )
        )
    return found


def with_optimizer_findings(result: Result, findings: list[Finding]) -> list[Finding]:
    """``findings`` plus the optimizer's. The line of an optimizer's step or
    zero_grad never gets the generic dispatch-count finding: a per-parameter loop
    gets the optimizer finding (which names the fix), and a ``foreach``/``fused``
    step's few ops are already what the optimizer does best there."""
    extra = optimizer_findings(result)
    lines = {(o.file, o.line) for o in result.optimizers}
    return [f for f in findings if not (f.kind == "dispatches" and (f.file, f.line) in lines)] + extra

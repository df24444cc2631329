"""Fused-op patterns: a known computation written op by op, named with the one
op that does it (finding kind ``fused_op``).

A pattern is a set of ATen ops the lines of one function dispatch themselves
(``findings.direct_ops``: not the ops nested inside them), found around an
*anchor* op only that computation has (``tanh`` for the tanh GELU, ``rsqrt``
for RMSNorm). The fix names the op, because "fuse these dispatches" does not
say how, and ``torch.compile`` is not always an option.

* **Where.** The involved lines are the function's lines with the pattern's
  ops within ``SPAN`` lines of an anchor line (a GELU three lines below a
  LayerNorm is not part of it), minus lines an earlier pattern claimed.
  Patterns are tried in order (LayerNorm before RMSNorm: LayerNorm also has
  mean, add, rsqrt and mul); one whose anchor lines were all claimed is
  skipped, so a function can hold an RMSNorm and a GELU and get both.
* **When.** ``PATTERN_MIN_DISPATCHES`` (3) dispatches per execution, or more
  (a function that already calls the fused op dispatches one), and the lines
  hold ``PATTERN_SHARE`` (5 %) or more of the step: the same floor as the
  dispatch hint (analyze.py), because the fix is named and exact.
* **Library code.** ``x = self.act(x)`` whose ops run inside transformers'
  ``NewGELUActivation`` (``LineStat.library_modules``) gets the pattern too,
  saying where the ops ran; transformers' own switch to the fused op is named
  (``activation_function="gelu_pytorch_tanh"`` runs ``F.gelu(approximate="tanh")``).

Measured (GPT-2, tiny random config, CPU; bench/README.md, "Advice checked"):
the tanh GELU line written op by op against ``gelu_pytorch_tanh``.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from trainium_lens.analysis.findings.ops import (
    direct_ops,
    dispatch_text,
    dispatches_per_execution,
    finding,
    line_share,
    op_base,
)
from trainium_lens.model import figures
from trainium_lens.model.lines import LineStat
from trainium_lens.model.result import Finding, Result

PATTERN_SHARE = 0.05
PATTERN_MIN_DISPATCHES = 3
SPAN = 4  # lines around an anchor line that can be part of the same computation

GELU_TANH = 'torch.nn.functional.gelu(x, approximate="tanh")'


@dataclass(frozen=True)
class Pattern:
    name: str
    needs: tuple[frozenset[str], ...]  # each: at least one of these ops present
    anchor: frozenset[str]  # ops only this computation has among the needs
    fix: str
    what: str  # "RMSNorm op by op": what the lines compute
    # extra advice when the ops ran inside a library (module prefix -> text)
    library_fix: tuple[tuple[str, str], ...] = ()


# Checked in order; see the module docstring.
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
        frozenset({"sub"}),
        "torch.nn.functional.layer_norm",
        "LayerNorm op by op",
    ),
    Pattern(
        "rms_norm",
        (
            frozenset({"mean"}),
            frozenset({"mul", "pow", "square"}),
            frozenset({"add"}),
            frozenset({"rsqrt", "sqrt", "reciprocal"}),
        ),
        frozenset({"rsqrt", "sqrt", "reciprocal"}),
        "torch.rms_norm",
        "RMSNorm op by op",
    ),
    Pattern(
        "gelu_tanh",
        (frozenset({"tanh"}), frozenset({"pow", "mul"}), frozenset({"add"}), frozenset({"mul"})),
        frozenset({"tanh"}),
        GELU_TANH,
        "the tanh GELU op by op",
        (("transformers", 'in transformers, activation_function="gelu_pytorch_tanh" runs it'),),
    ),
    Pattern(
        "gelu_erf",
        (frozenset({"erf"}), frozenset({"mul", "div"}), frozenset({"add"})),
        frozenset({"erf"}),
        "torch.nn.functional.gelu(x)",
        "the erf GELU op by op",
    ),
    Pattern(
        "softmax",
        (frozenset({"exp"}), frozenset({"sum"}), frozenset({"div"})),
        frozenset({"exp"}),
        "torch.softmax",
        "softmax op by op",
    ),
    Pattern(
        "silu",
        (frozenset({"sigmoid"}), frozenset({"mul"})),
        frozenset({"sigmoid"}),
        "torch.nn.functional.silu",
        "SiLU op by op",
    ),
)


def pattern_findings(result: Result) -> list[Finding]:
    return [finding for finding, _lines in _judged(result)]


def pattern_lines(result: Result) -> dict[tuple[str, int], str]:
    """Every line a fused-op finding covers (not only the first it names), with the
    fix: other rules leave those lines to it."""
    return {(s.file, s.line): f.fix or "" for f, involved in _judged(result) for s in involved}


def _judged(result: Result) -> list[tuple[Finding, list[LineStat]]]:
    if result.backend == "xla":
        return []  # the compiler fuses a traced graph itself: eager fusion advice does not apply
    by_function: dict[str, list[LineStat]] = defaultdict(list)
    for stat in result.lines:
        by_function[stat.function or result.function.name].append(stat)
    found = []
    for function, stats in by_function.items():
        direct = {id(s): {op_base(o.name) for o in direct_ops(s, result)} for s in stats}
        claimed: set[int] = set()
        for pattern in PATTERNS:
            match = _match(pattern, stats, direct, claimed)
            if match is None:
                continue
            claimed.update(id(s) for s in match)
            finding = _judge(pattern, match, function, result)
            if finding is not None:
                found.append((finding, match))
    return found


def _match(pattern: Pattern, stats: list[LineStat], direct: dict, claimed: set[int]) -> list[LineStat] | None:
    """The pattern's lines in this function, or None where it is not there."""
    wanted = frozenset().union(*pattern.needs)
    anchors = [s for s in stats if direct[id(s)] & pattern.anchor and id(s) not in claimed]
    if not anchors:
        return None
    near = {
        id(s): s
        for s in stats
        if id(s) not in claimed
        and direct[id(s)] & wanted
        and any(s.file == a.file and abs(s.line - a.line) <= SPAN for a in anchors)
    }
    present = set().union(*(direct[k] for k in near))
    if not all(present & need for need in pattern.needs):
        return None
    return sorted(near.values(), key=lambda s: (s.file, s.line))


def _judge(pattern: Pattern, involved: list[LineStat], function: str, result: Result) -> Finding | None:
    dispatches = sum(dispatches_per_execution(s) for s in involved)
    share = line_share(involved, result)
    if dispatches < PATTERN_MIN_DISPATCHES or (share is not None and share < PATTERN_SHARE):
        return None
    first, last = involved[0].line, involved[-1].line
    where = (
        f"lines {first}–{last} of {function}() compute"
        if first != last
        else f"line {first} of {function}() computes"
    )
    modules = list(
        dict.fromkeys(m for s in involved if (s.via_library or 0) >= 0.5 for m in s.library_modules)
    )
    inside = f" inside {', '.join(modules)}" if modules else ""
    per = "execution" if any((s.hits or 1) > 1 for s in involved) else "call"
    fwd = sum(s.self_time_us for s in involved)
    bwd = sum(s.backward_self_time_us + s.recompute_time_us for s in involved)
    cost = (
        f"{figures.time_us(fwd)} forward + {figures.time_us(bwd)} backward" if bwd else figures.time_us(fwd)
    )
    extra = [text for prefix, text in pattern.library_fix if any(m.startswith(prefix) for m in modules)]
    return finding(
        "fused_op",
        involved[0].file,
        first,
        f"{where} {pattern.what}{inside}: {dispatch_text(dispatches)} per {per}, "
        f"{cost}; {pattern.fix} does it in one fused op" + (f" ({'; '.join(extra)})" if extra else "") + ".",
        fix=pattern.fix,
    )

"""Known computations written op by op, named with the one op that computes
them (finding kind ``fused_op``), as an observation: the one op is a
*candidate*, untested here. It is not always faster (the bundled RMSNorm
example on CPU: ``torch.rms_norm`` 0.92–0.95× the op-by-op version; ``F.rms_norm``
in a tiny Llama step −1.2…+1.1 %), so no pattern finding says it is;
``trainium-lens fix`` measures the ones that can be written as an edit
(``analysis/fixes/``, ``docs/fixes.md``).

A pattern is a set of ATen ops the lines of one function dispatch themselves
(``findings.direct_ops``: not the ops nested inside them), found around an
*anchor* op only that computation has (``tanh`` for the tanh GELU, ``rsqrt``
for RMSNorm).

* **Where.** The involved lines are the function's lines with the pattern's
  ops within ``SPAN`` lines of an anchor line (a GELU three lines below a
  LayerNorm is not part of it), minus lines an earlier pattern claimed, and
  only lines whose *own* compute ops all belong to the pattern (``ALLOWED``
  adds dtype casts and, for SwiGLU and attention, the matmuls): a loss line
  or an optimizer's ``step()`` between two norm lines is not part of the norm,
  so the figures are only the pattern's lines'. Patterns are tried in order
  (LayerNorm before RMSNorm: LayerNorm also has mean, add, rsqrt and mul; the
  attention before a softmax written out); one whose anchor lines were all
  claimed is skipped, so a function can hold an RMSNorm and a GELU and get both.
* **When.** ``PATTERN_MIN_DISPATCHES`` (3) dispatches per execution, or more
  (a function that already calls the fused op dispatches one; SwiGLU and the
  attention: 2), and the lines hold ``PATTERN_SHARE`` (5 %) or more of the
  step: the same floor as the dispatch hint.
* **Library code.** A line whose torch calls ran mostly inside code the user
  did not ``--include`` (``LineStat.via_library``: ``out = model(x)`` of a
  transformers model) is never part of a pattern: its ops are the whole
  library call's, summed over every module it ran. When its ops hold a
  pattern's, it gets a ``library_pattern`` hint saying the computation is in
  there and how to see it (``--include PACKAGE``), without figures.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from trainium_lens.analysis.findings.ops import (
    VIEW_OPS,
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
LIBRARY_SHARE = 0.5  # a line whose torch calls ran mostly in library code: not part of a pattern
# Ops any line of a pattern may hold besides the pattern's own: casts and copies
# (LlamaRMSNorm's ``.to(torch.float32)`` and back) compute nothing of another computation.
ALLOWED = frozenset({"to", "_to_copy", "copy_", "type_as", "clone", "lift_fresh_copy"}) | VIEW_OPS
MATMULS = frozenset({"mm", "addmm", "bmm", "baddbmm", "matmul", "linear"})
LIBRARY_KIND = "library_pattern"

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
    extra: frozenset[str] = frozenset()  # other compute ops a line of it may hold (matmuls)
    min_dispatches: int = 3


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
        extra=frozenset({"add"}),  # the eps, and a bias
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
        "attention",
        (frozenset({"softmax", "_softmax", "exp"}), frozenset({"bmm", "matmul", "baddbmm"})),
        frozenset({"softmax", "_softmax", "exp"}),
        "torch.nn.functional.scaled_dot_product_attention",
        "attention written out (matmul, softmax, matmul)",
        extra=MATMULS | frozenset({"div", "mul", "sum", "sub", "amax", "max", "add", "masked_fill"}),
        min_dispatches=2,
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
    Pattern(
        "swiglu",
        (frozenset({"silu"}), frozenset({"mul"})),
        frozenset({"silu"}),
        "",  # no one torch op computes it: a fused kernel is torch.compile's or a library's
        "SwiGLU (silu(gate) * up)",
        extra=MATMULS,
        min_dispatches=2,
    ),
)


def pattern_findings(result: Result) -> list[Finding]:
    return [finding for finding, _lines in _judged(result)] + _library_notes(result)


def pattern_lines(result: Result) -> dict[tuple[str, int], str]:
    """Every line a fused-op finding covers (not only the first it names), with the
    fix: other rules leave those lines to it."""
    lines = {(s.file, s.line): f.candidate or "" for f, involved in _judged(result) for s in involved}
    # a library call holding a pattern's ops: the library_pattern hint speaks for it
    lines.update({(f.file, f.line): f.candidate or "" for f in _library_notes(result)})
    return lines


def judged(result: Result) -> list[tuple[Finding, list[LineStat]]]:
    """Each pattern finding with the lines it covers (``analysis/fixes`` writes edits of them)."""
    return _judged(result)


def _judged(result: Result) -> list[tuple[Finding, list[LineStat]]]:
    if result.backend == "xla":
        return []  # the compiler fuses a traced graph itself: eager fusion advice does not apply
    by_function: dict[str, list[LineStat]] = defaultdict(list)
    for stat in result.lines:
        by_function[stat.function or result.function.name].append(stat)
    found = []
    for function, stats in by_function.items():
        stats = [s for s in stats if _own(s, result)]
        direct = {id(s): {op_base(o.name) for o in direct_ops(s, result)} - VIEW_OPS for s in stats}
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


def _own(stat: LineStat, result: Result) -> bool:
    """A line whose ops are its own: not mostly library code, not an optimizer's step."""
    if (stat.via_library or 0.0) >= LIBRARY_SHARE:
        return False
    return not any(o.file == stat.file and o.line == stat.line for o in result.optimizers)


def _match(pattern: Pattern, stats: list[LineStat], direct: dict, claimed: set[int]) -> list[LineStat] | None:
    """The pattern's lines in this function, or None where it is not there."""
    wanted = frozenset().union(*pattern.needs)
    allowed = wanted | pattern.extra | ALLOWED
    # a line with ops of another computation is not this one's (a loss, a matmul beside a norm)
    fits = [s for s in stats if id(s) not in claimed and direct[id(s)] and direct[id(s)] <= allowed]
    anchors = [s for s in fits if direct[id(s)] & pattern.anchor]
    if not anchors:
        return None
    near = {
        id(s): s
        for s in fits
        if direct[id(s)] & wanted and any(s.file == a.file and abs(s.line - a.line) <= SPAN for a in anchors)
    }
    present = set().union(*(direct[k] for k in near))
    if not all(present & need for need in pattern.needs):
        return None
    return sorted(near.values(), key=lambda s: (s.file, s.line))


def _judge(pattern: Pattern, involved: list[LineStat], function: str, result: Result) -> Finding | None:
    dispatches = sum(dispatches_per_execution(s) for s in involved)
    share = line_share(involved, result)
    if dispatches < pattern.min_dispatches or (share is not None and share < PATTERN_SHARE):
        return None
    numbers = [s.line for s in involved]
    where = (
        f"{_lines_text(numbers)} of {function}() compute"
        if len(numbers) > 1
        else f"line {numbers[0]} of {function}() computes"
    )
    per = "execution" if any((s.hits or 1) > 1 for s in involved) else "call"
    fwd = sum(s.self_time_us for s in involved)
    bwd = sum(s.backward_self_time_us + s.recompute_time_us for s in involved)
    cost = (
        f"{figures.time_us(fwd)} forward + {figures.time_us(bwd)} backward" if bwd else figures.time_us(fwd)
    )
    candidate = (
        f"{pattern.fix} computes it in one op; whether that is faster here is untested"
        if pattern.fix
        else "no single torch op computes it; whether a fused kernel (torch.compile) is faster is untested"
    )
    return finding(
        "fused_op",
        involved[0].file,
        numbers[0],
        f"{where} {pattern.what}: {dispatch_text(dispatches)} per {per}, {cost}. {candidate}.",
        candidate=pattern.fix or None,
    )


def _lines_text(numbers: list[int]) -> str:
    """``lines 3–6`` when they are consecutive, else ``lines 3, 5, 6``."""
    if numbers == list(range(numbers[0], numbers[-1] + 1)):
        return f"lines {numbers[0]}–{numbers[-1]}"
    return "lines " + ", ".join(str(n) for n in numbers)


def _library_notes(result: Result) -> list[Finding]:
    """A line whose ops ran mostly in library code it did not include, holding a
    pattern's ops: the computation is in there, said without figures (the line's
    are the whole library call's)."""
    if result.backend == "xla":
        return []
    found = []
    for stat in sorted(result.lines, key=lambda s: (s.file, s.line)):
        if (stat.via_library or 0.0) < LIBRARY_SHARE or not stat.library_modules:
            continue
        own = {op_base(o.name) for o in direct_ops(stat, result)}
        named = [p for p in PATTERNS if all(own & need for need in p.needs)]
        # a LayerNorm's ops also hold an RMSNorm's: name the first only where its anchor is
        named = [p for p in named if own & p.anchor][:1]
        if not named:
            continue
        pattern = named[0]
        packages = list(dict.fromkeys(m.split(".")[0] for m in stat.library_modules))
        ops = ", ".join(sorted(own & frozenset().union(*pattern.needs)))
        extra = [
            t for prefix, t in pattern.library_fix if any(m.startswith(prefix) for m in stat.library_modules)
        ]
        found.append(
            Finding(
                kind=LIBRARY_KIND,
                severity="hint",
                file=stat.file,
                line=stat.line,
                message=f"Ops of {pattern.what} ({ops}) ran inside {', '.join(packages)}, reached from "
                f"this line: its figures are the whole library call's, not the pattern's; profile with "
                f"--include {packages[0]} to see the lines that dispatch them"
                + (f" ({'; '.join(extra)})" if extra else "")
                + ".",
                candidate=pattern.fix or None,
            )
        )
    return found

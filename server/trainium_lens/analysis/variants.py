"""Comparisons: variants of one file side by side, and one run against another.

Pure functions of results; both return dataclasses with ``to_dict()`` because
the language server sends them to the editor as JSON.

Output tolerances (``TOLERANCES``) follow ``torch.testing.assert_close``'s
defaults per dtype, with bfloat16's absolute tolerance raised to 1e-2 (the
variants of one computation legitimately differ by an ulp or two in bf16,
and one bf16 ulp near 1.0 is 7.8e-3). The harness records the largest
absolute difference against the first variant and the largest magnitude of
that reference output, so the check is norm-wise::

    max|out - ref| <= atol + rtol * max|ref|

which accepts whatever an element-wise ``allclose`` accepts (and a little
more when the largest difference sits on a small element).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from trainium_lens.harness.markers import variant_group
from trainium_lens.model.result import LineStat, Result

# dtype -> (atol, rtol)
TOLERANCES = {
    "torch.bfloat16": (1e-2, 1.6e-2),
    "torch.float16": (1e-3, 1e-3),
    "torch.float32": (1e-5, 1.3e-6),
    "torch.float64": (1e-7, 1e-7),
}
DEFAULT_TOLERANCE = (1e-5, 1.3e-6)


def tolerance_for(dtype: str | None) -> tuple[float, float]:
    if not dtype:
        return DEFAULT_TOLERANCE
    key = dtype if dtype.startswith("torch.") else f"torch.{dtype}"
    aliases = {
        "torch.half": "torch.float16",
        "torch.float": "torch.float32",
        "torch.double": "torch.float64",
        "torch.bf16": "torch.bfloat16",
    }
    return TOLERANCES.get(aliases.get(key, key), DEFAULT_TOLERANCE)


@dataclass
class VariantRow:
    variant: str  # function name
    run_id: str
    line: int  # def line
    clock: str
    time_us: float  # primary clock, per call
    self_cpu_us: float
    dispatches: float
    wall_us_median: float | None
    max_abs_diff: float | None
    tolerance: float | None  # the bound max_abs_diff is checked against
    # "reference" | "ok" | "differs" | "shape differs" | "n/a" (no output) |
    # "unchecked" (beyond atol, and no reference magnitude to apply rtol to)
    verdict: str
    speedup: float | None  # reference time / this time (primary clock)
    wall_speedup: float | None
    # training steps (schema 2): time_us split; None where the run measured no backward
    forward_us: float | None = None
    backward_us: float | None = None
    optimizer_us: float | None = None


@dataclass
class Comparison:
    clock: str  # the common clock, or "mixed"
    reference: str | None
    rows: list[VariantRow] = field(default_factory=list)
    fastest: str | None = None  # by primary time

    def to_dict(self) -> dict:
        return asdict(self)


def _verdict(result: Result, reference: Result) -> tuple[str, float | None]:
    out, ref = result.output, reference.output
    if ref.shape is not None and out.shape is not None and out.shape != ref.shape:
        return "shape differs", None
    if out.max_abs_diff is None:
        return "n/a", None
    atol, rtol = tolerance_for(out.dtype or ref.dtype)
    if ref.max_abs is None:
        # Without the reference's magnitude only the absolute part is known:
        # within it is surely fine; beyond it cannot be judged honestly.
        return ("ok" if out.max_abs_diff <= atol else "unchecked"), atol
    bound = atol + rtol * ref.max_abs
    return ("ok" if out.max_abs_diff <= bound else "differs"), bound


def _split(r: Result) -> dict:
    t = r.totals
    if not t.has_backward:
        return {}
    return {
        "forward_us": t.forward_time_us + t.recompute_time_us,
        "backward_us": t.backward_time_us,
        "optimizer_us": t.optimizer_time_us,
    }


def compare_variants(results: list[Result]) -> Comparison:
    """One row per result; the first is the reference for speed and output."""
    if not results:
        return Comparison(clock="", reference=None)
    reference = results[0]
    clocks = {r.clock for r in results}
    rows = []
    for i, r in enumerate(results):
        if i == 0:
            verdict, bound = "reference", None
        else:
            verdict, bound = _verdict(r, reference)
        same_clock = r.clock == reference.clock
        speedup = (
            reference.totals.self_time_us / r.totals.self_time_us
            if same_clock and r.totals.self_time_us > 0
            else None
        )
        wall = r.totals.wall_us_median
        ref_wall = reference.totals.wall_us_median
        rows.append(
            VariantRow(
                variant=r.function.name,
                run_id=r.run_id,
                line=r.function.line,
                clock=r.clock,
                time_us=r.totals.self_time_us,
                self_cpu_us=r.totals.self_cpu_us,
                dispatches=r.totals.dispatches,
                wall_us_median=wall,
                max_abs_diff=None if i == 0 else r.output.max_abs_diff,
                tolerance=bound,
                verdict=verdict,
                speedup=speedup,
                wall_speedup=(ref_wall / wall) if wall and ref_wall else None,
                **_split(r),
            )
        )
    fastest = min(rows, key=lambda row: row.time_us).variant if len(clocks) == 1 else None
    return Comparison(
        clock=clocks.pop() if len(clocks) == 1 else "mixed",
        reference=reference.function.name,
        rows=rows,
        fastest=fastest,
    )


# -- which results are variants ---------------------------------------------------


def _group_key(result: Result) -> str:
    """The harness's grouping of variants (``markers.variant_group``)."""
    return variant_group(result.function.compare, result.function.inputs)


def _same_output(a: Result, b: Result) -> bool:
    return a.output.shape == b.output.shape and a.output.dtype == b.output.dtype


def variant_groups(results: list[Result]) -> tuple[list[list[Result]], list[Result]]:
    """``(groups, others)``: groups of two or more variants, each in the given
    order, and every result that is no one's variant.

    Variants share an ``inputs=`` function (or both have none) and return
    outputs of the first's shape and dtype (a forward pass and a training step
    on the same inputs are not variants), or name the same ``compare=`` group (explicit: kept together
    whatever they return; the output check still says if they differ)."""
    keyed: dict[str, list[Result]] = {}
    others: list[Result] = []
    for r in results:
        key = _group_key(r)
        members = keyed.setdefault(key, [])
        if members and key.startswith("inputs:") and not _same_output(members[0], r):
            others.append(r)
            continue
        members.append(r)
    groups = []
    for members in keyed.values():
        if len(members) > 1:
            groups.append(members)
        else:
            others.extend(members)
    order = {id(r): i for i, r in enumerate(results)}
    others.sort(key=lambda r: order[id(r)])
    return groups, others


@dataclass
class SummaryRow:
    function: str
    run_id: str
    line: int
    clock: str
    time_us: float
    dispatches: float
    wall_us_median: float | None


def summarize(results: list[Result]) -> list[SummaryRow]:
    """A plain row per result (no speedups, no output check): for functions
    that are not variants of each other."""
    return [
        SummaryRow(
            function=r.function.name,
            run_id=r.run_id,
            line=r.function.line,
            clock=r.clock,
            time_us=r.totals.self_time_us,
            dispatches=r.totals.dispatches,
            wall_us_median=r.totals.wall_us_median,
        )
        for r in results
    ]


# -- one run against another -----------------------------------------------------


@dataclass
class LineDelta:
    before_line: int | None
    after_line: int | None
    text: str  # the line as it is after (or before, when removed)
    before_us: float | None
    after_us: float | None
    delta_us: float
    ratio: float | None  # after / before
    status: str  # "same" | "moved" | "edited" | "added" | "removed"
    before_calls: float | None = None
    after_calls: float | None = None


@dataclass
class TotalsDelta:
    before_us: float
    after_us: float
    delta_us: float
    ratio: float | None
    before_wall_us: float | None
    after_wall_us: float | None
    before_dispatches: float
    after_dispatches: float


@dataclass
class RunDiff:
    before: str  # run ids
    after: str
    function: str
    clock: str
    comparable: bool  # False when the two runs used different clocks
    note: str | None
    totals: TotalsDelta
    lines: list[LineDelta] = field(default_factory=list)  # biggest change first

    def to_dict(self) -> dict:
        return asdict(self)


def _ratio(after: float | None, before: float | None) -> float | None:
    return after / before if before and after is not None else None


def match_lines(before: list[LineStat], after: list[LineStat]):
    """Pairs (b, a) by: same text and number; same text (nearest number, the
    code moved); same number (the line was edited). Leftovers are removed/added.

    Linear in the number of lines (dictionaries, not an all-pairs scan): the
    editor pairs every annotated line of two runs, thousands on big files."""
    pairs: list[tuple[LineStat | None, LineStat | None, str]] = []
    left_a = {(a.file, a.line): a for a in after}
    left_b = []
    for b in before:  # same text, same number
        a = left_a.get((b.file, b.line))
        if a is not None and a.text.strip() == b.text.strip():
            pairs.append((b, left_a.pop((a.file, a.line)), "same"))
        else:
            left_b.append(b)
    by_text: dict[tuple[str, str], list[LineStat]] = {}
    for a in left_a.values():
        if a.text.strip():
            by_text.setdefault((a.file, a.text.strip()), []).append(a)
    rest = []
    for b in left_b:  # same text, nearest number (the code moved)
        candidates = by_text.get((b.file, b.text.strip())) if b.text.strip() else None
        if candidates:
            a = min(candidates, key=lambda a: abs(a.line - b.line))
            candidates.remove(a)
            pairs.append((b, left_a.pop((a.file, a.line)), "moved"))
        else:
            rest.append(b)
    removed = []
    for b in rest:  # same number (the line was edited)
        a = left_a.pop((b.file, b.line), None)
        if a is not None:
            pairs.append((b, a, "edited"))
        else:
            removed.append(b)
    pairs += [(b, None, "removed") for b in removed]
    pairs += [(None, a, "added") for a in left_a.values()]
    return pairs


def diff_runs(before: Result, after: Result) -> RunDiff:
    comparable = before.clock == after.clock
    note = None
    if not comparable:
        note = (
            f"different clocks ({before.clock} before, {after.clock} after): "
            f"the deltas compare unlike figures"
        )
    elif before.host != after.host:
        note = f"different hosts ({before.host} before, {after.host} after)"
    rows = []
    for b, a, status in match_lines(before.lines, after.lines):
        b_us = b.self_time_us if b else None
        a_us = a.self_time_us if a else None
        rows.append(
            LineDelta(
                before_line=b.line if b else None,
                after_line=a.line if a else None,
                text=(a or b).text if (a or b) else "",
                before_us=b_us,
                after_us=a_us,
                delta_us=(a_us or 0.0) - (b_us or 0.0),
                ratio=_ratio(a_us, b_us),
                status=status,
                before_calls=b.calls if b else None,
                after_calls=a.calls if a else None,
            )
        )
    rows.sort(key=lambda r: (-abs(r.delta_us), r.after_line or r.before_line or 0))
    bt, at = before.totals, after.totals
    totals = TotalsDelta(
        before_us=bt.self_time_us,
        after_us=at.self_time_us,
        delta_us=at.self_time_us - bt.self_time_us,
        ratio=_ratio(at.self_time_us, bt.self_time_us),
        before_wall_us=bt.wall_us_median,
        after_wall_us=at.wall_us_median,
        before_dispatches=bt.dispatches,
        after_dispatches=at.dispatches,
    )
    return RunDiff(
        before=before.run_id,
        after=after.run_id,
        function=after.function.name,
        clock=after.clock if comparable else "mixed",
        comparable=comparable,
        note=note,
        totals=totals,
        lines=rows,
    )

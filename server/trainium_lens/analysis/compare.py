"""One run against another: what changed per line, forward and backward.

Pure functions of results (``diff_runs``); the dataclasses have ``to_dict()``
because the language server sends them to the editor as JSON and
``trainium-lens compare --json`` writes them.

**Whole step.** Each line carries its forward (``self_time_us``: the ops the
line dispatched, the optimizer's included on its ``step()`` line), its backward
(``backward_self_time_us`` plus ``recompute_time_us``: what the autograd engine
ran for the line's forward ops, checkpointing's re-run included) and their sum
(``LineStat.time_us``), before and after. **The parts add up**: the lines'
fwd+bwd plus the unattributed bucket is the step's total on each side
(``result.Totals.self_time_us``), so the line deltas plus the unattributed
delta are the total delta (``TotalsDelta.lines_*``, ``*_unattributed_us``).

**Lines are file-qualified.** A line is matched only with a line of the same
file (``LineStat.file``): a helper module's line 12 is not the profiled file's
line 12, and a moved line of another file still pairs with itself.

**Speedup.** The per-line figures are the profiled clock (the only per-line
figures there are); the step's ``speedup`` comes from the true clock, as the
variants' table's does (``analysis.variants.speedup_basis``): device time, else
the unprofiled wall medians.

The variants of one file side by side live in ``analysis/variants.py``; their
names are re-exported here for older callers.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from trainium_lens.analysis.variants import (  # noqa: F401  (re-exported)
    BASIS_WALL,
    TOLERANCES,
    Comparison,
    SummaryRow,
    VariantRow,
    compare_variants,
    disturbed_note,
    noisy_note,
    speedup_basis,
    summarize,
    tolerance_for,
    true_time,
    variant_groups,
)
from trainium_lens.model.lines import LineStat
from trainium_lens.model.result import Result


@dataclass
class LineDelta:
    before_line: int | None
    after_line: int | None
    text: str  # the line as it is after (or before, when removed)
    # fwd+bwd (``LineStat.time_us``): what the line costs a step; forward alone
    # for a run without backward
    before_us: float | None
    after_us: float | None
    delta_us: float
    ratio: float | None  # after / before
    status: str  # "same" | "moved" | "edited" | "added" | "removed"
    before_calls: float | None = None
    after_calls: float | None = None
    file: str = ""  # the line's file (workspace-relative, or an --include'd module path)
    before_fwd_us: float | None = None  # forward self time (the optimizer's on its step line)
    after_fwd_us: float | None = None
    fwd_delta_us: float = 0.0
    before_bwd_us: float | None = None  # backward self time + recompute
    after_bwd_us: float | None = None
    bwd_delta_us: float = 0.0


@dataclass
class TotalsDelta:
    # the whole step (``Totals.self_time_us``), profiled clock
    before_us: float
    after_us: float
    delta_us: float
    ratio: float | None
    before_wall_us: float | None
    after_wall_us: float | None
    before_dispatches: float
    after_dispatches: float
    # after / before on the true clock (device time, else unprofiled walls), and which
    speedup: float | None = None
    speedup_basis: str | None = None
    # the step split as the harness measured it (Totals.*_time_us); backward includes recompute
    before_forward_us: float = 0.0
    after_forward_us: float = 0.0
    before_backward_us: float = 0.0
    after_backward_us: float = 0.0
    before_optimizer_us: float = 0.0
    after_optimizer_us: float = 0.0
    # the parts of the table: sums over its lines, and the bucket no line owns;
    # lines fwd + lines bwd + unattributed = the step, on each side
    before_lines_fwd_us: float = 0.0
    after_lines_fwd_us: float = 0.0
    before_lines_bwd_us: float = 0.0
    after_lines_bwd_us: float = 0.0
    before_unattributed_us: float = 0.0
    after_unattributed_us: float = 0.0


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
    backward: bool = False  # either run measured backward: the fwd/bwd columns mean something
    file: str = ""  # the profiled function's file: its lines print as bare numbers

    def to_dict(self) -> dict:
        return asdict(self)


def _ratio(after: float | None, before: float | None) -> float | None:
    return after / before if before and after is not None else None


def fwd_us(stat: LineStat) -> float:
    return stat.self_time_us


def bwd_us(stat: LineStat) -> float:
    return stat.backward_self_time_us + stat.recompute_time_us


def match_lines(
    before: list[LineStat], after: list[LineStat]
) -> list[tuple[LineStat | None, LineStat | None, str]]:
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


def _line_delta(b: LineStat | None, a: LineStat | None, status: str) -> LineDelta:
    either = a or b
    assert either is not None
    b_fwd, a_fwd = (fwd_us(b) if b else None), (fwd_us(a) if a else None)
    b_bwd, a_bwd = (bwd_us(b) if b else None), (bwd_us(a) if a else None)
    b_us, a_us = (b.time_us if b else None), (a.time_us if a else None)
    return LineDelta(
        before_line=b.line if b else None,
        after_line=a.line if a else None,
        text=either.text,
        before_us=b_us,
        after_us=a_us,
        delta_us=(a_us or 0.0) - (b_us or 0.0),
        ratio=_ratio(a_us, b_us),
        status=status,
        before_calls=b.calls if b else None,
        after_calls=a.calls if a else None,
        file=either.file,
        before_fwd_us=b_fwd,
        after_fwd_us=a_fwd,
        fwd_delta_us=(a_fwd or 0.0) - (b_fwd or 0.0),
        before_bwd_us=b_bwd,
        after_bwd_us=a_bwd,
        bwd_delta_us=(a_bwd or 0.0) - (b_bwd or 0.0),
    )


def _totals(before: Result, after: Result) -> TotalsDelta:
    bt, at = before.totals, after.totals
    basis, _why = speedup_basis([before, after])
    b_true, a_true = true_time(before, basis), true_time(after, basis)
    return TotalsDelta(
        before_us=bt.self_time_us,
        after_us=at.self_time_us,
        delta_us=at.self_time_us - bt.self_time_us,
        ratio=_ratio(at.self_time_us, bt.self_time_us),
        before_wall_us=bt.wall_us_median,
        after_wall_us=at.wall_us_median,
        before_dispatches=bt.dispatches,
        after_dispatches=at.dispatches,
        speedup=(b_true / a_true) if b_true and a_true else None,
        speedup_basis=basis if b_true and a_true else None,
        before_forward_us=bt.forward_time_us,
        after_forward_us=at.forward_time_us,
        before_backward_us=bt.backward_time_us + bt.recompute_time_us,
        after_backward_us=at.backward_time_us + at.recompute_time_us,
        before_optimizer_us=bt.optimizer_time_us,
        after_optimizer_us=at.optimizer_time_us,
        before_lines_fwd_us=sum(fwd_us(s) for s in before.lines),
        after_lines_fwd_us=sum(fwd_us(s) for s in after.lines),
        before_lines_bwd_us=sum(bwd_us(s) for s in before.lines),
        after_lines_bwd_us=sum(bwd_us(s) for s in after.lines),
        before_unattributed_us=before.unattributed_us,
        after_unattributed_us=after.unattributed_us,
    )


def diff_runs(before: Result, after: Result) -> RunDiff:
    comparable = before.clock == after.clock
    notes = []
    if not comparable:
        notes.append(
            f"different clocks ({before.clock} before, {after.clock} after): "
            f"the deltas compare unlike figures"
        )
    elif before.host != after.host:
        notes.append(f"different hosts ({before.host} before, {after.host} after)")
    if (before.function.file, before.function.name) != (after.function.file, after.function.name):
        notes.append(f"different functions ({before.function.name} before, {after.function.name} after)")
    basis, _why = speedup_basis([before, after])
    sides = ["the run before", "the run after"]
    if basis == BASIS_WALL and (noisy := noisy_note([before, after], sides)):
        notes.append(noisy.replace("those speedups are", "the speedup is"))
    if disturbed := disturbed_note([before, after], sides):
        notes.append(disturbed)
    rows = [_line_delta(b, a, status) for b, a, status in match_lines(before.lines, after.lines)]
    home = after.function.file
    rows.sort(key=lambda r: (-abs(r.delta_us), r.file != home, r.file, r.after_line or r.before_line or 0))
    return RunDiff(
        before=before.run_id,
        after=after.run_id,
        function=after.function.name,
        clock=after.clock if comparable else "mixed",
        comparable=comparable,
        note="; ".join(notes) or None,
        totals=_totals(before, after),
        lines=rows,
        backward=before.totals.has_backward or after.totals.has_backward,
        file=home,
    )

"""The regression gate: did a run get slower than its baseline, beyond a threshold
*and* beyond the noise of both measurements? Per function and per line
(forward + backward + recompute, ``LineStat.time_us``). Pure functions of two
results; ``cli/commands/check.py`` profiles, asks, and turns the answer into an exit
status, JUnit XML and GitHub annotations.

Judged from the per-step samples the two results hold (``Totals.step_us``,
``LineStat.step_us``; any count — the harness may measure more steps when a
run is noisy). What a shared host does to them was measured on this project's
2-core machine at load averages of 6–13 (docs/ci.md, "How the gate judges"):
load only ever *adds* time, in bursts that hit lines unequally — in one
baseline the first matmul of 13 of 20 steps took 13–56 ms while the same
matmul right after it took 0.8 ms — and the host's speed changes from run to
run. So:

1. **Clean steps**: those within 1.5× of the fastest step (``Options.clean``):
   the steps the load left alone. **Typical cost** = their median. On the
   loaded host a baseline of 20 steps kept 3 of them; a quiet one keeps all.
2. **The host's speed** (``drift``): for the lines that did exactly the same
   work in both runs (same text, same ops, same calls per step), their typical
   cost now over then; the *median* over those lines (one stalled line must not
   set the host's speed). When the host ran slower now (drift > 1), the
   baseline is scaled by it before judging; when it ran faster, not (a
   regression can then hide: the report says so below 0.5). Beyond
   ``BUSY_DRIFT`` either way the measurement is ``busy``: not judged, and
   ``check`` measures again.
3. **Effect**: slower than baseline × max(1, drift) by more than
   ``max_regression`` (10%), and by more than ``min_effect`` (3%) of the
   baseline's step in µs — a line that costs nothing cannot fail a build by
   doubling. Why 3%: between runs on the loaded host an unchanged 30–70 µs
   ``h.sum()`` line moved 2× (28 µs clean in the baseline, 60–70 µs in every
   later run) while its steps within each run agreed — noise no sample of one
   run shows; at 1% of a 2 ms step it failed the same code once in 12 checks.
4. **Beyond the noise**: a one-sided Mann–Whitney U test (``mann_whitney.py``) of
   this run's clean steps against the baseline's × max(1, drift) × (1 +
   threshold) rejects at ``alpha`` (0.01): the samples must show that the item
   costs more than that, not merely that the medians differ. Too few clean
   steps to ever reach ``alpha`` (3 against 4: p ≥ 1/35) is "not judged", and
   ``check`` measures again to gather more.

An item needs samples on both sides: a baseline from before schema 3 has no
per-line samples (lines are "not judged"; the function still is, from
``per_step_self_time_us``, raw); too few steps to ever reach ``alpha`` is said
as such, never silently passed.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, field

from trainium_lens.analysis import noise
from trainium_lens.analysis.compare import match_lines
from trainium_lens.analysis.gate.mann_whitney import greater_p, smallest_p
from trainium_lens.model import figures
from trainium_lens.model.lines import LineStat
from trainium_lens.model.result import Result

REGRESSED = "regressed"
WITHIN_NOISE = "within noise"  # over the thresholds, but the steps overlap
NOT_JUDGED = "not judged"  # over the thresholds on its figures, but no (or too few) samples
NOT_CONFIRMED = "not confirmed"  # regressed in one measurement, not in the re-measurement
OK = "ok"
FASTER = "faster"
NEW = "new"  # a line the baseline did not have

BUSY_DRIFT = 3.0  # the control ran this much faster or slower: too changed to judge


@dataclass
class Options:
    max_regression: float = 0.10  # fraction of the item's baseline cost
    min_effect: float = 0.03  # fraction of the baseline's whole step (see the docstring)
    alpha: float = 0.01  # one-sided level of the rank test
    clean: float = 1.5  # steps within this factor of the fastest are the ones judged


@dataclass
class Item:
    kind: str  # "function" | "line"
    file: str
    line: int  # the line in this run (a function: its def line)
    text: str  # the source line (a function: its name)
    before_us: float | None  # typical step cost (median of the clean steps), primary clock
    after_us: float | None
    status: str
    reason: str  # one line: why this status
    p: float | None = None  # the rank test's p-value, when it ran
    steps: tuple[int, int] = (0, 0)  # samples judged: baseline, this run
    baseline_line: int | None = None  # where the line was in the baseline
    # the change the threshold saw: against baseline × max(1, the host's drift)
    judged_change: float | None = None

    @property
    def change(self) -> float | None:
        if self.before_us is None or self.after_us is None:
            return None
        if self.before_us <= 0:
            return math.inf if self.after_us > 0 else 0.0
        return self.after_us / self.before_us - 1.0


@dataclass
class Report:
    function: str
    file: str
    clock: str
    baseline: str  # run id
    baseline_commit: str  # GitState.short
    baseline_where: str  # backend@host
    run: str
    run_commit: str
    options: Options
    items: list[Item] = field(default_factory=list)  # the function first, then lines
    notes: list[str] = field(default_factory=list)
    measurements: int = 1  # runs of this code measured for the verdict
    # How much slower the lines that did the same work ran (``drift``): their typical
    # cost now over then, summed; None when too little of the step did the same work.
    drift: float | None = None

    unconfirmed: bool = False  # a regression the re-measurements could not confirm (``combine``)
    # The run's own evidence said its steps were disturbed (analysis/noise.py): it is
    # still judged from its clean steps, and ``check`` measures again to pool more.
    noisy: bool = False

    @property
    def busy(self) -> bool:
        """The unchanged work ran slower too: the host (or the inputs) changed, not
        the code, and no item of this measurement can be judged."""
        return self.drift is not None and not 1.0 / BUSY_DRIFT <= self.drift <= BUSY_DRIFT

    @property
    def judgeable(self) -> bool:
        """False when the verdict cannot be trusted either way: a busy host, an
        unconfirmed regression, or a step over the thresholds without samples."""
        blind = any(i.kind == "function" and i.status == NOT_JUDGED for i in self.items)
        return not (self.busy or self.unconfirmed or blind)

    @property
    def regressions(self) -> list[Item]:
        return [i for i in self.items if i.status == REGRESSED]

    @property
    def unjudged(self) -> list[Item]:
        return [i for i in self.items if i.status == NOT_JUDGED]

    @property
    def failed(self) -> bool:
        return bool(self.regressions) and not self.busy

    def to_dict(self) -> dict:
        data = asdict(self)
        for item, raw in zip(self.items, data["items"], strict=True):
            for key in ("change", "judged_change"):
                value = getattr(item, key)
                raw[key] = value if value is None or math.isfinite(value) else None  # JSON has no inf
        return data


def fastest(samples: list[float], clean: float) -> list[float]:
    """The steps the load left alone: those within ``clean``× of the fastest one,
    fastest first. Load only ever adds time, in stalls far longer than the step's
    own jitter (measured: 13–56 ms stalls of a 0.8 ms line); a line whose fastest
    step is 0 keeps its fastest quarter instead."""
    if not samples:
        return []
    ordered = sorted(samples)
    if ordered[0] <= 0:
        return ordered[: max(1, math.ceil(len(ordered) / 4))]
    return [x for x in ordered if x <= ordered[0] * clean]


def typical(samples: list[float], clean: float) -> float | None:
    kept = fastest(samples, clean)
    return statistics.median(kept) if kept else None


def incompatible(before: Result, after: Result) -> str | None:
    """Why ``before`` cannot be this run's baseline (one line), or None. A result
    file from another machine of the same kind is fine; another backend, clock or
    kind of machine is not: its per-line times measure something else."""
    if before.backend != after.backend or before.clock != after.clock:
        return (
            f"the baseline {before.run_id} was measured on backend {before.backend} (clock "
            f"{before.clock}), this run on {after.backend} (clock {after.clock}): per-line times "
            f"of different backends are not comparable; record a baseline on {after.backend}"
        )
    b_env, a_env = before.environment, after.environment
    for label, was, now in (
        ("instance type", b_env.instance_type, a_env.instance_type),
        ("device", b_env.device_name, a_env.device_name),
    ):
        if was and now and was != now:
            return (
                f"the baseline {before.run_id} ran on another kind of machine ({label} {was}, this "
                f"run {now}): record a baseline on a {now}"
            )
    if before.world_size != after.world_size:
        return (
            f"the baseline {before.run_id} ran on {before.world_size} rank(s), this run on "
            f"{after.world_size}: record a baseline with the same --nproc"
        )
    if (before.function.file, before.function.name) != (after.function.file, after.function.name):
        return (
            f"the baseline {before.run_id} is of {before.function.file}::{before.function.name}, "
            f"not {after.function.file}::{after.function.name}"
        )
    return None


def _notes(before: Result, after: Result, opts: Options) -> list[str]:
    notes = []
    if before.host != after.host:
        notes.append(f"baseline from host {before.host}, this run on {after.host} (same backend and kind)")
    for label, was, now in (
        ("torch", before.environment.torch, after.environment.torch),
        ("torch-neuronx", before.environment.torch_neuronx, after.environment.torch_neuronx),
    ):
        if was and now and was != now:
            notes.append(f"{label} {was} in the baseline, {now} now: a change may be the library's")
    for which, result in (("the baseline", before), ("this measurement", after)):
        if _noisy(result):
            notes.append(
                f"{which} was measured on a disturbed host ({'; '.join(noise.evidence(result)) or 'noisy'}): "
                f"only steps within {opts.clean:g}× of the fastest are compared"
            )
    return notes


def _noisy(result: Result) -> bool:
    """The run carries the ``noisy_measurement`` finding its own evidence earned."""
    return any(f.kind == noise.KIND for f in result.findings)


def _work(stat: LineStat) -> tuple:
    """What a line asked of the device per step: its text, its ops and their calls."""
    ops = [(o.name, round(o.calls, 2)) for o in stat.ops]
    ops += [(o.name, round(o.calls, 2)) for o in stat.backward_ops]
    return (stat.text.strip(), tuple(sorted(ops)))


def drift(before: Result, after: Result, opts: Options) -> float | None:
    """How much slower the host ran the lines that did the same work: the median
    over those lines of their typical cost now over then. None without such
    lines (or samples); work that grows alike on every line (bigger inputs)
    reads as a slower host too."""
    ratios = []
    for b, a, _status in match_lines(before.lines, after.lines):
        if a is None or b is None or _work(a) != _work(b) or not b.step_us or not a.step_us:
            continue
        was, now = typical(b.step_us, opts.clean), typical(a.step_us, opts.clean)
        if was and now and was > 0:
            ratios.append(now / was)
    return statistics.median(ratios) if ratios else None


def _judge(
    kind: str,
    where: tuple[str, int, str],
    before: list[float],
    after: list[float],
    means: tuple[float, float],
    floor_us: float,
    scale: float,
    opts: Options,
    typicals: tuple[float, float] | None = None,
) -> Item:
    """One item: see the module's docstring for the steps. ``typicals``: the typical
    costs when something better than the item's own clean steps knows them."""
    file, line, text = where
    have = bool(before) and bool(after)
    b_us = typical(before, opts.clean) if have else means[0]
    a_us = typical(after, opts.clean) if have else means[1]
    if typicals is not None:
        b_us, a_us = typicals
    item = Item(kind, file, line, text, b_us, a_us, OK, "")
    expected = (b_us or 0.0) * scale
    change = (a_us or 0.0) / expected - 1.0 if expected > 0 else (math.inf if (a_us or 0.0) > 0 else 0.0)
    item.judged_change = change
    effect = (a_us or 0.0) - expected
    if effect <= floor_us or change <= opts.max_regression:
        faster = -effect > floor_us and change < -opts.max_regression
        item.status = FASTER if faster else OK
        item.reason = "faster" if faster else "within the threshold"
        return item
    if not have:
        item.status = NOT_JUDGED
        item.reason = "no per-step samples in the baseline (recorded before schema 3): cannot judge noise"
        return item
    kept_b, kept_a = fastest(before, opts.clean), fastest(after, opts.clean)
    item.steps = (len(kept_b), len(kept_a))
    if smallest_p(len(kept_b), len(kept_a)) > opts.alpha:
        item.status = NOT_JUDGED
        item.reason = (
            f"too few steps to tell from noise ({len(before)} in the baseline, {len(after)} now: "
            f"the fastest {len(kept_b)} against {len(kept_a)} can never reach p < {opts.alpha:g}); "
            f"measure more (--active 20)"
        )
        return item
    item.p = greater_p(kept_a, [x * scale * (1.0 + opts.max_regression) for x in kept_b])
    against = f"baseline × {scale:.2f} (the host's drift)" if scale != 1.0 else "baseline"
    if item.p < opts.alpha:
        item.status = REGRESSED
        item.reason = (
            f"slower than {against} + {opts.max_regression:.0%} beyond the noise (rank test p={item.p:.2g}, "
            f"fastest {len(kept_b)} vs {figures.plural(len(kept_a), 'step')})"
        )
    else:
        item.status = WITHIN_NOISE
        item.reason = f"its fastest steps overlap {against} + {opts.max_regression:.0%} (p={item.p:.2g})"
    return item


def judge(before: Result, after: Result, opts: Options | None = None) -> Report:
    """``after`` against the baseline ``before`` (check ``incompatible`` first)."""
    opts = opts or Options()
    fn = after.function
    report = Report(
        function=fn.name,
        file=fn.file,
        clock=after.clock,
        baseline=before.run_id,
        baseline_commit=before.git.short,
        baseline_where=f"{before.backend}@{before.host}",
        run=after.run_id,
        run_commit=after.git.short,
        options=opts,
        notes=_notes(before, after, opts),
        noisy=_noisy(after),
    )
    b_steps, a_steps = before.totals.samples, after.totals.samples
    # The baseline's step as the sum of its lines' typical costs: the fastest steps of
    # the total can still each hold one stalled line on a loaded host.
    step_us = sum(typical(s.step_us, opts.clean) or 0.0 for s in before.lines)
    step_us = step_us or (typical(b_steps, opts.clean) if b_steps else None) or before.totals.self_time_us
    floor_us = opts.min_effect * step_us
    report.drift = drift(before, after, opts)
    scale = max(1.0, report.drift) if report.drift is not None and not report.busy else 1.0
    if report.drift is not None and report.drift < 0.5:
        report.notes.append(
            f"the unchanged lines ran {figures.ratio(report.drift)} as long as in the baseline: it was "
            f"measured on a busier host, and a regression can hide behind that; record it again on a "
            f"quiet one"
        )
    if report.drift is None:
        report.notes.append("no line did the same work in both runs: the host's speed is unknown")
    report.items.append(
        _judge(
            "function",
            (fn.file, fn.line, fn.name),
            b_steps,
            a_steps,
            (before.totals.self_time_us, after.totals.self_time_us),
            0.0,  # the whole step: the threshold alone
            scale,
            opts,
            _step_typicals(before, after, opts),
        )
    )
    lines: list[Item] = []
    for b, a, _status in match_lines(before.lines, after.lines):
        if a is None:
            continue  # removed: it costs nothing now
        if b is None:
            if a.time_us > floor_us:
                typ = _line_typical(a, opts)
                lines.append(Item("line", a.file, a.line, a.text, None, typ, NEW, "not in the baseline"))
            continue
        where = (a.file, a.line, a.text)
        item = _judge("line", where, b.step_us, a.step_us, (b.time_us, a.time_us), floor_us, scale, opts)
        item.baseline_line = b.line
        lines.append(item)
    rank = {REGRESSED: 0, NEW: 1, WITHIN_NOISE: 2, NOT_JUDGED: 3}
    lines.sort(key=lambda i: (rank.get(i.status, 9), -((i.after_us or 0.0) - (i.before_us or 0.0))))
    report.items += lines
    return report


def _step_typicals(before: Result, after: Result, opts: Options) -> tuple[float, float] | None:
    """The step's typical cost as the sum of its lines' (and the unattributed time):
    on a loaded host nearly every step has *some* line stalled, so the totals of
    whole steps have few clean ones (measured: 1 of 20) while each line has
    several. None unless both runs have per-line samples."""
    if not all(s.step_us for s in before.lines) or not all(s.step_us for s in after.lines):
        return None
    if not before.lines or not after.lines:
        return None
    was = sum(typical(s.step_us, opts.clean) or 0.0 for s in before.lines) + before.unattributed_us
    now = sum(typical(s.step_us, opts.clean) or 0.0 for s in after.lines) + after.unattributed_us
    return was, now


def _line_typical(stat: LineStat, opts: Options) -> float:
    value = typical(stat.step_us, opts.clean) if stat.step_us else None
    return stat.time_us if value is None else value

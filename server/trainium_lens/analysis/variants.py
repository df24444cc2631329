"""Variants of one computation side by side: speed and output.

Pure functions of results; they return dataclasses with ``to_dict()`` because
the language server sends them to the editor as JSON.

**Speedups come from the true clock** (``speedup_basis``): device time where
every variant has device time (``neuron``, ``cuda``), else the unprofiled wall
medians (``Totals.wall_us_median``: the function called without the profiler,
synchronized) — the walls timed in turn where the harness paired them
(``Totals.paired_wall_us_*``, harness/eager/paired.py: one call of each variant per
round, so a host that speeds up or slows down between variants reaches all of
them alike). Never from profiled CPU time: the profiler's own cost per op
event inflates it, small ops most, so on the bundled RMSNorm example the
profiled CPU figure ranked ``torch.rms_norm`` (one op, ~16 µs unprofiled)
below the six-op version (~17 µs unprofiled). The profiled figures stay in the
table as where-the-time-went, never as the ranking.

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

import dataclasses
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from trainium_lens.harness.markers import variant_group
from trainium_lens.model.result import Result

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


# Clocks that are device time: a speedup may come from them directly.
DEVICE_CLOCKS = frozenset({"neuron", "cuda"})
BASIS_DEVICE = "device time"
BASIS_WALL = "unprofiled wall median"
# A wall median this far above the best call: most calls were slowed (a busy
# host), so a speedup from it is flagged (examples/train_step.py on the shared
# 2-core machine at load 6-12: medians 80-335 ms against best calls of 2.1-2.3 ms).
NOISY_WALL = 1.5


@dataclass
class VariantRow:
    variant: str  # function name
    run_id: str
    line: int  # def line
    clock: str
    time_us: float  # primary clock, per call (profiled)
    self_cpu_us: float
    dispatches: float
    wall_us_median: float | None
    max_abs_diff: float | None
    tolerance: float | None  # the bound max_abs_diff is checked against
    # "reference" | "ok" | "differs" | "shape differs" | "n/a" (no output) |
    # "unchecked" (beyond atol, and no reference magnitude to apply rtol to)
    verdict: str
    # reference / this, on the comparison's ``speedup_basis`` (device time, else the
    # unprofiled wall medians); None where that figure is missing
    speedup: float | None
    wall_speedup: float | None  # reference wall / this wall, whatever the basis
    # training steps (schema 2): time_us split; None where the run measured no backward
    forward_us: float | None = None
    backward_us: float | None = None
    optimizer_us: float | None = None
    wall_us_min: float | None = None
    wall_us_max: float | None = None
    rank: int | None = None  # 1 = fastest on the basis; None without a figure there
    wall_noisy: bool = False  # wall median over NOISY_WALL × the best call: a busy host
    profiled_speedup: float | None = None  # reference / this on the profiled clock: not a ranking
    # the figure per call each result's headline shows (Result.per_call_us: cpu, ops + host)
    per_call_us: float | None = None


@dataclass
class Comparison:
    clock: str  # the common clock, or "mixed"
    reference: str | None
    rows: list[VariantRow] = field(default_factory=list)
    fastest: str | None = None  # on ``speedup_basis``; None when the walls were disturbed
    speedup_basis: str | None = None  # BASIS_DEVICE | BASIS_WALL; None: neither figure for all
    note: str | None = None  # why the basis is what it is, when it is not device time
    # the wall figures are the variants' timed in turn (harness/eager/paired.py), not each
    # one's own unprofiled wall (its header's): the table names them so
    walls_in_turn: bool = False

    def to_dict(self) -> dict:
        return asdict(self)


def _verdict(result: Result, reference: Result) -> tuple[str, float | None]:
    out, ref = result.output, reference.output
    if ref.shape is not None and out.shape is not None and out.shape != ref.shape:
        return "shape differs", None
    if out.mismatch:  # another tensor's shape, or how many: as different as a shape
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


def has_device_time(result: Result) -> bool:
    return result.clock in DEVICE_CLOCKS and result.signals.device_time_reported


def true_time(result: Result, basis: str | None) -> float | None:
    """The figure a speedup is taken from: device time, or the unprofiled wall."""
    if basis == BASIS_DEVICE:
        return result.totals.self_time_us or None
    if basis == BASIS_WALL:
        return result.totals.wall_us_median or None
    return None


def speedup_basis(results: list[Result]) -> tuple[str | None, str | None]:
    """``(basis, note)``: device time when every result has it on one clock,
    else the unprofiled wall medians when every result has one, else None."""
    clocks = {r.clock for r in results}
    if len(clocks) == 1 and all(has_device_time(r) for r in results):
        return BASIS_DEVICE, None
    if all(r.totals.wall_us_median for r in results):
        if len(clocks) > 1 or any(r.clock in DEVICE_CLOCKS for r in results):
            why = "the runs have no common device clock"
        else:
            why = (
                f"{'/'.join(sorted(clocks))} time is profiled: the profiler's cost per op event "
                f"inflates it, small ops most"
            )
        if all(r.totals.paired_wall_us_median for r in results) and len(results) > 1:
            return (
                BASIS_WALL,
                f"speedups from the unprofiled wall medians, the variants timed in turn ({why})",
            )
        return BASIS_WALL, f"speedups from the unprofiled wall medians ({why})"
    return None, "no speedups: the runs have neither device time nor unprofiled wall medians"


def wall_noisy(result: Result) -> bool:
    """Most unprofiled calls ran slow: the wall median is not what the code costs."""
    t = result.totals
    return bool(t.wall_us_median and t.wall_us_min and t.wall_us_median > NOISY_WALL * t.wall_us_min)


def noisy_note(results: list[Result], names: list[str] | None = None) -> str | None:
    """Why speedups from these results' wall medians are not to be trusted, or
    None. ``names``: how to call each result (default: its function)."""
    names = names or [r.function.name for r in results]
    noisy = [(n, r) for n, r in zip(names, results, strict=True) if wall_noisy(r)]
    if not noisy:
        return None
    ratio = max((r.totals.wall_us_median or 0) / (r.totals.wall_us_min or 1) for _n, r in noisy)
    return (
        f"the wall median of {', '.join(n for n, _r in noisy)} is over {NOISY_WALL:g}× its best "
        f"call (up to {ratio:.3g}×): the host was busy, so those speedups are not reliable; profile again "
        f"on a quieter machine"
    )


# The finding a run gets when its measurement was disturbed (the noise check of
# the analysis); a comparison that uses such a run says so.
NOISY_KIND = "noisy_measurement"


def disturbed_note(results: list[Result], names: list[str] | None = None) -> str | None:
    """Which of these results carry a ``noisy_measurement`` finding, in words."""
    names = names or [r.function.name for r in results]
    hit = [n for n, r in zip(names, results, strict=True) if any(f.kind == NOISY_KIND for f in r.findings)]
    if not hit:
        return None
    was = "was" if len(hit) == 1 else "were"
    return (
        f"{', '.join(hit)} {was} measured on a disturbed host (noisy_measurement): "
        f"their figures are not reliable"
    )


def paired(results: list[Result]) -> list[Result]:
    """The results with their walls timed in turn in place of their own, when every
    one has them (copies: the stored results keep both); else as they are."""
    if len(results) < 2 or not all(r.totals.paired_wall_us_median for r in results):
        return results
    return [
        dataclasses.replace(
            r,
            totals=dataclasses.replace(
                r.totals,
                wall_us_median=r.totals.paired_wall_us_median,
                wall_us_min=r.totals.paired_wall_us_min,
                wall_us_max=r.totals.paired_wall_us_max,
            ),
        )
        for r in results
    ]


def compare_variants(results: list[Result]) -> Comparison:
    """One row per result; the first is the reference for speed and output."""
    if not results:
        return Comparison(clock="", reference=None)
    in_turn = paired(results)  # walls timed side by side, where the harness has them
    walls_in_turn = in_turn is not results
    results = in_turn
    reference = results[0]
    clocks = {r.clock for r in results}
    basis, note = speedup_basis(results)
    ref_time = true_time(reference, basis)
    ref_wall = reference.totals.wall_us_median
    rows = []
    for i, r in enumerate(results):
        if i == 0:
            verdict, bound = "reference", None
        else:
            verdict, bound = _verdict(r, reference)
        time = true_time(r, basis)
        wall = r.totals.wall_us_median
        same_clock = r.clock == reference.clock
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
                speedup=(ref_time / time) if ref_time and time else None,
                wall_speedup=(ref_wall / wall) if wall and ref_wall else None,
                wall_us_min=r.totals.wall_us_min,
                wall_us_max=r.totals.wall_us_max,
                wall_noisy=basis == BASIS_WALL and wall_noisy(r),
                per_call_us=r.per_call_us,
                profiled_speedup=(
                    reference.totals.self_time_us / r.totals.self_time_us
                    if same_clock and r.totals.self_time_us > 0
                    else None
                ),
                **_split(r),
            )
        )
    timed = sorted(
        (row for row, r in zip(rows, results, strict=True) if true_time(r, basis)), key=_key(basis)
    )
    for n, row in enumerate(timed, 1):
        row.rank = n
    noisy = noisy_note(results) if basis == BASIS_WALL else None
    if noisy:
        note = f"{note}; {noisy}" if note else noisy
    if disturbed := disturbed_note(results):
        note = f"{note}; {disturbed}" if note else disturbed
    return Comparison(
        clock=clocks.pop() if len(clocks) == 1 else "mixed",
        reference=reference.function.name,
        rows=rows,
        fastest=timed[0].variant if timed and not noisy else None,  # a busy host ranks nothing
        speedup_basis=basis,
        note=note,
        walls_in_turn=walls_in_turn,
    )


def _key(basis: str | None) -> Callable[[VariantRow], float]:
    """The ranking clock (only rows that have it are ranked)."""
    if basis == BASIS_DEVICE:
        return lambda row: row.time_us or 0.0
    return lambda row: row.wall_us_median or 0.0


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

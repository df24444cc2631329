"""One verdict from several measurements of the same code against one baseline.

``check`` measures again while a measurement shows a regression, an item over
the thresholds that its samples could not show beyond noise or had too few
clean steps to judge, a host whose load changed too much, or a run its own
evidence judged noisy (``needs_another``). Then:

* busy measurements are set aside (``Report.busy``);
* the rest are **pooled**: their per-step samples judged as one run (more
  steps, more power: a line whose fastest steps overlap the baseline's in one
  run on a loaded host shows plainly in three);
* a regression of the pooled run stands only if the item was over the
  thresholds in *every* usable measurement (a burst of load
  in one run, diluted into the pool, must not pass for a slower line) and, with ``need``
  = 2, in at least two of them; seen in one usable measurement only, it is
  "not confirmed" and the verdict is "cannot judge", never a silent pass.
"""

from __future__ import annotations

import copy

from trainium_lens.analysis.gate.judge import (
    NOT_CONFIRMED,
    NOT_JUDGED,
    REGRESSED,
    WITHIN_NOISE,
    Options,
    Report,
    judge,
)
from trainium_lens.model.result import Result

OVER = (REGRESSED, WITHIN_NOISE, NOT_JUDGED)  # over the thresholds by its typical cost


def needs_another(report: Report) -> bool:
    """Would another measurement change what this one says (or make it surer)?"""
    return report.busy or report.noisy or any(i.status in OVER for i in report.items)


def pool(runs: list[Result]) -> Result:
    """The runs' per-step samples as one run (the last one's figures otherwise):
    each line's samples concatenated in the same order as the step totals; a
    line a run did not execute counts 0 in that run's steps."""
    merged = copy.deepcopy(runs[-1])
    if len(runs) == 1:
        return merged
    merged.findings = []  # judged per run (``combine`` counts the noisy ones), not of the pool
    merged.totals.step_us = [x for r in runs for x in r.totals.samples]
    for stat in merged.lines:
        samples: list[float] = []
        for r in runs:
            mine = r.line(stat.file, stat.line)
            width = len(r.totals.samples)
            got = mine.step_us if mine is not None and len(mine.step_us) == width else [0.0] * width
            samples += got
        stat.step_us = samples
    return merged


def combine(before: Result, runs: list[Result], opts: Options | None = None, need: int = 2) -> Report:
    """The verdict on ``runs`` (same code, measured in turn) against ``before``."""
    opts = opts or Options()
    reports = [judge(before, r, opts) for r in runs]
    usable = [r for r, rep in zip(runs, reports, strict=True) if not rep.busy]
    if not usable:
        final = reports[-1]
        final.measurements = len(runs)
        return final
    each = [rep for rep in reports if not rep.busy]
    final = judge(before, pool(usable), opts)
    final.measurements = len(runs)
    final.run = usable[-1].run_id
    aside = len(runs) - len(usable)
    if aside:
        drifts = ", ".join(f"{rep.drift:.2g}×" for rep in reports if rep.busy)
        final.notes.append(
            f"{aside} of {len(runs)} measurements set aside: the unchanged lines ran {drifts} as long "
            f"as in the baseline (the host's load changed too much)"
        )
    if len(usable) > 1:
        final.notes.append(f"the samples of {len(usable)} measurements judged together")
        noisy = sum(rep.noisy for rep, r in zip(reports, runs, strict=True) if r in usable)
        if noisy:
            final.notes.append(
                f"{noisy} of them on a disturbed host by their own evidence: as in every "
                f"measurement, only steps within {opts.clean:g}× of the fastest are compared"
            )
    for item in final.items:
        if item.status != REGRESSED:
            continue
        key = (item.kind, item.file, item.line)
        seen = [_status(rep, key) for rep in each]
        if not all(st in OVER for st in seen):
            item.status = NOT_CONFIRMED
            shown = ", ".join(st or "–" for st in seen)
            item.reason = f"over the threshold in some measurements only ({shown}): taken as noise"
        elif len(usable) < need:
            item.status = NOT_CONFIRMED
            item.reason = (
                f"regressed (p={item.p:.2g}) in the only measurement on a host quiet enough to judge: "
                f"cannot confirm it"
            )
            final.unconfirmed = True
    return final


def _status(report: Report, key: tuple) -> str | None:
    """The item's verdict in one measurement: over the thresholds there
    (regressed, or within noise), or not."""
    for i in report.items:
        if (i.kind, i.file, i.line) == key:
            return i.status
    return None

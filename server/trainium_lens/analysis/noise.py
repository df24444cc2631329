"""Noise detected and said: ``noisy_measurement`` and ``unreconciled``.

The harness measures what the host did while a function ran (``Stability``:
which steps waited for a CPU, other processes' CPU time, involuntary context
switches) and re-measures disturbed steps up to a cap. This module judges the
outcome, from the run's own evidence only:

* **noisy** when the figures could not be measured cleanly —
  - fewer than half the wanted steps were clean even after the extra steps, or
  - fewer than half the unprofiled timing calls were (the wall itself is
    disturbed), or
  - the host was busy (another process used ``OTHERS_CORES`` cores or more, our
    threads waited ``DELAY_SHARE`` of the step time, or were switched out
    every step) *and* the figures show it: the steps used still vary more than
    ``SPREAD``× or the profiled time is ``RATIO``× off the unprofiled wall.

  A busy machine alone is not noise: a run whose steps stayed clean and agree
  with the wall keeps its findings (on the shared development machines other
  processes use a core or more most of the time) — but see *outside load*. A noisy result gets a
  ``noisy_measurement`` warning with its evidence, its timing-based findings
  (fuse hints, dispatch counts, the labelling note, roofline verdicts, the
  optimizer choice) are withheld, and the editor tints its hints as unreliable.
  A straggler (ranks of one run against each other) is kept with a caution.
* **outside_load** (warning, findings kept) when processes outside the job used
  ``OTHERS_CORES`` cores or more (``harness/runtime/outside.py`` tells the job's own
  apart), or the kernel says the host was contended (memory pressure, steal time):
  a load that slows the steps and the unprofiled wall alike (memory bandwidth,
  caches) leaves them agreeing with each other, so no check of the figures
  against the wall can see it; the run says it was measured under that load and
  names it (the processes that used the most, the evidence that fired).
* **shared_cores** (info): the job's own processes (sibling ranks, the launcher)
  shared the cores and our threads waited for them, with no outside load. That
  is the job's shape, not noise: the waits are not held against the run.
* **unreconciled** (info) when a result that is not noisy still falls outside
  the reconciliation tolerance (``reconcile.py``), with the likely reason.
"""

from __future__ import annotations

import dataclasses
import math

from trainium_lens.model import figures
from trainium_lens.model.evidence import Stability
from trainium_lens.model.result import Finding, Result

KIND = "noisy_measurement"
UNRECONCILED = "unreconciled"
FIX_OFFERED = "fix_offered"
OUTSIDE_LOAD = "outside_load"
SHARED_CORES = "shared_cores"
OTHERS_CORES = 0.5  # or a tenth of the CPUs, if more: other processes' CPU that marks a busy host
JOB_CORES = 0.5  # the job's other processes used this much: they shared the cores
MEMORY_PRESSURE = 0.05  # share of the window some task stalled on memory (PSI)
CPU_PRESSURE = 0.10  # share of the window some task waited for a CPU (PSI): named beside the load
STEAL_CORES = 0.10
DELAY_SHARE = 0.10
SPREAD = 3.0
RATIO = 2.0
# decided from time shares or time ratios: not shown when the times are noise
# Findings judged from measured times (shares of the step, speeds against a roof,
# timed optimizer implementations): withheld from a noisy run.
TIMING_KINDS = frozenset(
    {
        "dispatches",
        "fused_op",
        "instrumentation_overhead",
        "below_roof",
        "overhead_bound",
        "memory_bound",
        "optimizer_loop",
        "optimizer_choice",
        "checkpoint",  # kept activations are bytes, but the advice weighs them against a recompute
        "data_wait",
    }
)


def outside_load(st: Stability) -> list[str]:
    """What outside the job loaded the host while the run was measured, each piece of
    evidence that fired in words (empty: nothing did)."""
    out = []
    if st.others_cores is not None and st.others_cores >= max(OTHERS_CORES, 0.1 * (st.cpus or 1)):
        of = f" of {st.cpus}" if st.cpus else ""
        top = f": {', '.join(st.outside_top)}" if st.outside_top else ""
        out.append(f"processes outside this job used {st.others_cores:.1f}{of} cores during the run{top}")
        if st.cpu_pressure_some is not None and st.cpu_pressure_some >= CPU_PRESSURE:
            out.append(
                f"runnable tasks waited for a CPU {figures.pct(100 * st.cpu_pressure_some)} of it (PSI)"
            )
    if st.memory_pressure_some is not None and st.memory_pressure_some >= MEMORY_PRESSURE:
        out.append(f"tasks stalled on memory {figures.pct(100 * st.memory_pressure_some)} of the run (PSI)")
    if st.steal_cores is not None and st.steal_cores >= STEAL_CORES:
        out.append(f"the hypervisor ran others on {st.steal_cores:.1f} of this VM's cores (steal time)")
    return out


def _job_shape(st: Stability, outside: list[str]) -> bool:
    """The job's own processes shared the cores and nothing outside loaded the host:
    our threads' waits for a CPU are the job's shape, not noise."""
    return not outside and st.job_cores is not None and st.job_cores >= JOB_CORES


def evidence(result: Result) -> list[str]:
    """Why the run is noisy (empty: it is not)."""
    st = result.stability
    if st is None:
        return []
    host = outside_load(st)
    own = _job_shape(st, host)
    if not own and st.run_delay_share is not None and st.run_delay_share >= DELAY_SHARE:
        host.append(f"its threads waited for a CPU {figures.pct(100 * st.run_delay_share)} of the step time")
    if not own and st.step_switches is not None and st.step_switches >= 1:
        host.append(f"{st.step_switches:g} involuntary context switches per step")
    failed = []
    if own:
        pass  # steps that waited for a sibling rank are the job's steps as they run
    elif st.steps_wanted and st.steps_clean < math.ceil(st.steps_wanted / 2):
        failed.append(
            f"{st.steps_measured - st.steps_clean} of {st.steps_measured} measured steps were "
            f"disturbed (only {st.steps_clean} clean, {st.steps_wanted} wanted)"
        )
    wanted = result.function.protocol.timing_calls
    if not own and st.timing_calls and st.timing_clean < math.ceil(wanted / 2):
        disturbed = st.timing_calls - st.timing_clean
        failed.append(f"{disturbed} of {st.timing_calls} unprofiled calls were disturbed")
    if host:
        steps = [v for v in result.totals.step_us if v > 0]
        if len(steps) > 1 and max(steps) > SPREAD * min(steps):
            failed.append(f"steps varied {max(steps) / min(steps):.0f}×")
        rec = result.reconciliation
        if rec is not None and not rec.within and (rec.ratio > RATIO or rec.ratio < 1 / RATIO):
            if result.clock == "cpu" or rec.ratio > RATIO:
                failed.append(f"profiled {rec.ratio:.2g}× the unprofiled {_reference(rec.reference)}")
    return host + failed if failed else []


def _fix(st: Stability | None) -> str:
    """What to do about a noisy run. Torch's intra-op threads on every core beside an outside
    load wait on each other in every op (OpenMP's barriers: a thread descheduled for the
    other job holds the rest): on the 2-core VM, nanoGPT's forward, timed without the tool
    beside one CPU spinner, read 188–192 ms on 2 threads and 3.8–3.9 ms on 1 (2.5–4.2 ms with
    no spinner; docs/accuracy.md)."""
    fix = "profile again on a quieter machine, or with more active steps"
    if st is None or not st.threads or not st.cpus or st.threads < st.cpus or not outside_load(st):
        return fix
    left = max(1, st.cpus - math.ceil(st.others_cores or 0.0))
    return (
        f"{fix}; or leave torch the cores the other load does not use (OMP_NUM_THREADS={left}): "
        f"its {st.threads} threads on {st.cpus} cores beside that load wait for each other in every op"
    )


def _cautioned(f: Finding) -> Finding:
    """A straggler compares the ranks of one run with each other: a host too busy for
    steady figures (often the ranks' own contention for its cores) still shows a
    rank that does several times the work, so it is kept, with the caution."""
    return dataclasses.replace(
        f, message=f.message + " (measured on a run judged noisy: confirm on a quieter host)"
    )


def _offered(f: Finding) -> Finding:
    """A withheld finding's fix, still offered as an edit: ``trainium-lens fix``
    measures it on its own (and judges that measurement's noise itself)."""
    assert f.edit is not None
    return Finding(
        kind=FIX_OFFERED,
        severity="hint",
        file=f.file,
        line=f.line,
        message=f"A fix is offered here as an edit ({f.edit.title}), untested here; its finding is "
        f"withheld on this noisy run. `trainium-lens fix` measures it against the code it replaces.",
        candidate=f.candidate,
        edit=f.edit,
    )


def _reference(reference: str) -> str:
    return "device span" if reference == "device_span" else "wall"


def with_noise_findings(result: Result, findings: list[Finding]) -> list[Finding]:
    """``findings`` with the noise verdict: a noisy run keeps only findings that do
    not rest on its times, plus the warning; a clean run out of tolerance gets
    the unreconciled note."""
    why = evidence(result)
    file, line = result.function.file, result.function.line
    if why:
        kept = [_cautioned(f) if f.kind == "straggler" else f for f in findings if f.kind not in TIMING_KINDS]
        withheld = len(findings) - len(kept)
        said = f"; {withheld} timing-based finding{'s' if withheld != 1 else ''} withheld" if withheld else ""
        offered = [_offered(f) for f in findings if f.kind in TIMING_KINDS and f.edit is not None]
        return (
            kept
            + offered
            + [
                Finding(
                    kind=KIND,
                    severity="warning",
                    file=file,
                    line=line,
                    message="Noisy measurement: " + "; ".join(why) + f". The figures are unreliable{said}.",
                    fix=_fix(result.stability),
                )
            ]
        )
    findings = findings + _load_notes(result)
    rec = result.reconciliation
    if rec is None or rec.within:
        return findings
    return findings + [
        Finding(kind=UNRECONCILED, severity="info", file=file, line=line, message=_unreconciled(result))
    ]


def _unreconciled(result: Result) -> str:
    """The ``unreconciled`` note's words: by how much, what it means for the lines, why."""
    rec = result.reconciliation
    assert rec is not None
    raw = f" (raw {figures.ratio(rec.raw_us / rec.reference_us)})" if rec.raw_us else ""
    said = f"The profiled time per {result.unit}"
    if result.clock == "cpu" and abs(rec.ratio - 1) <= rec.tolerance:
        # the ratio held; the figure shown (reconcile.SHOWN) or the host's speed did not
        held = f"within ±{rec.tolerance:.0%}"
        return f"{said} is {figures.ratio(rec.ratio)}{raw} the unprofiled wall, {held}, but {rec.note}."
    # a fitted result shows figures that meet the wall by the fit (Result.fit): what is off
    # is the measurement under them, not their sum
    unfitted = ", before its fit to the wall," if rec.shown_us is not None else ""
    consequence = (
        "the per-line figures shown are fitted to the wall, so how the time splits between lines "
        "is uncertain by about that much"
        if rec.shown_us is not None
        else "per-line figures are off by about that much"
    )
    tolerance = f"±{rec.tolerance:.0%}" if result.clock == "cpu" else f"at most +{rec.tolerance:.0%}"
    return (
        f"{said}{unfitted} is {figures.ratio(rec.ratio)}{raw} the unprofiled {_reference(rec.reference)} "
        f"(tolerance {tolerance}): {consequence}" + (f": {rec.note}." if rec.note else ".")
    )


def _load_notes(result: Result) -> list[Finding]:
    """A run not judged noisy: the outside load it was measured under (warning), or
    the job's own processes sharing the cores (info)."""
    st = result.stability
    if st is None:
        return []
    file, line = result.function.file, result.function.line
    outside = outside_load(st)
    if outside:
        return [
            Finding(
                kind=OUTSIDE_LOAD,
                severity="warning",
                file=file,
                line=line,
                message="Measured under outside load: " + "; ".join(outside) + ". A load that slows the "
                "profiled steps and the unprofiled wall alike (memory bandwidth, caches) leaves them "
                "agreeing with each other: the figures can be off by what it took from this run.",
                fix="profile again when the host is quieter",
            )
        ]
    waited = (st.run_delay_share or 0.0) >= DELAY_SHARE or (st.step_switches or 0.0) >= 1
    waited = waited or bool(st.steps_wanted and st.steps_clean < math.ceil(st.steps_wanted / 2))
    if not _job_shape(st, outside) or not waited:
        return []
    ranks = (
        f"{result.world_size} ranks" if result.world_size and result.world_size > 1 else "the job's processes"
    )
    cores = f" on {st.cpus} cores" if st.cpus else ""
    delay = (
        f" (run-queue wait {figures.pct(100 * st.run_delay_share)} of the step time)"
        if st.run_delay_share is not None
        else ""
    )
    return [
        Finding(
            kind=SHARED_CORES,
            severity="info",
            file=file,
            line=line,
            message=f"{ranks}{cores}: the ranks share the cores (the job's other processes used "
            f"{st.job_cores:.1f} cores during the run). Its threads' waits for a CPU{delay} are the "
            "job's own shape, not outside load: they are in the figures, as they are in the job.",
        )
    ]

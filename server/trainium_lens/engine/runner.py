"""One profile run, end to end: target → batch → analysis → store.

The CLI and the language server both call ``profile``; neither knows how a
target reaches its host or how results are stored.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import threading

from trainium_lens.analysis.findings.analyze import analyze
from trainium_lens.analysis.fixes.attach import with_edits
from trainium_lens.analysis.reconcile import reconcile
from trainium_lens.engine.device_profile import fill as fill_neuron_lines
from trainium_lens.engine.fix_source import SourceReader
from trainium_lens.engine.provenance import git_state
from trainium_lens.engine.rank_events import RankEvents
from trainium_lens.errors import LensError, NotStored, TargetError, TimedOut
from trainium_lens.model.codec import ResultError
from trainium_lens.model.job import Job
from trainium_lens.model.ranks import merge_document
from trainium_lens.model.result import Batch, Result
from trainium_lens.model.store import RunStore
from trainium_lens.targets.base import EventSink, Target

log = logging.getLogger(__name__)


def profile(
    job: Job,
    target: Target,
    on_event: EventSink | None = None,
    cancel: threading.Event | None = None,
    timeout: float | None = None,
    store: RunStore | None = None,
) -> list[Result]:
    """Run ``job`` on ``target``; return its results (file order), analysed.

    Results are stored only once the whole batch has arrived and validated, so
    a failed, cancelled or timed-out run leaves the store exactly as it was. A
    store that cannot be written raises ``NotStored``, which carries the results.
    Run folders of results the store pruned go too, on the target that holds them.
    """
    events = RankEvents(on_event or (lambda _event: None))  # torchrun jobs: one rank's progress
    git = git_state(job.workspace, job.file)  # before the run: an edit during it must not relabel it
    # the source as the run measures it: a fix's edit is built against this text
    read = SourceReader(job.workspace, {job.file})
    try:
        document = target.run(job, events, cancel, timeout)
    except TimedOut as exc:  # a hung rank: say which, and where it waited
        remove_own_folder(job, target)
        raise TimedOut(events.explain(str(exc))) from None
    except BaseException:  # failed or cancelled: no result will ever name its folder
        remove_own_folder(job, target)
        raise
    document = merge_document(document)  # a torchrun job's ranks → one result per function
    try:
        batch = Batch.from_dict(document)
    except ResultError as exc:
        raise TargetError(f"the harness wrote an unusable result: {exc}") from None
    if not batch.results:
        raise LensError("the harness returned no results")
    for result in batch.results:
        result.batch_id = result.batch_id or batch.batch_id
        result.git = dataclasses.replace(git)
        # xla on Trn1: per-line device time from the Parquet folders the harness listed
        fill_neuron_lines(result, functools.partial(target.fetch, workspace=job.workspace))
        result.reconciliation = reconcile(result)  # against the unprofiled wall / device span
        # fixes as edits of the source the run measured: analysis/fixes
        result.findings = analyze(result, edits=lambda r, found: with_edits(r, found, read))
    if store is not None:
        for result in batch.results:
            try:
                store.save(result)
            except OSError as exc:  # read-only or full disk: say where, keep the rest
                raise NotStored(
                    f"cannot store the result in {store.runs}: {exc.strerror or exc}", batch.results
                ) from None
            except LensError as exc:
                raise NotStored(str(exc), batch.results) from None
        prune_run_folders(job, target, store)
    return batch.results


#: Set (to anything) to keep the run folders of runs that are not stored.
KEEP_RUNS_ENV = "TRAINIUM_LENS_KEEP_RUNS"


def remove_own_folder(job: Job, target: Target) -> None:
    """This job's run folder on the target, for a run no stored result will name
    (it failed, was cancelled, or is not stored): nothing else would remove it."""
    if os.environ.get(KEEP_RUNS_ENV):
        return
    try:
        target.remove_runs(job.workspace, [job.batch_id])
    except Exception as exc:  # noqa: BLE001 - a folder left is no reason to hide the run's own error
        log.warning("could not remove the run folder %s on %s: %s", job.batch_id, target.host, exc)


def prune_run_folders(job: Job, target: Target, store: RunStore) -> None:
    """The run folders (on this target) of the batches no stored result names
    any more: pruned results take their traces and profiles with them."""
    pruned = store.take_pruned()
    if not pruned:
        return
    kept = {r.batch_id for r in store.load_all()}
    gone = sorted(
        {
            r.batch_id
            for r in pruned
            if r.batch_id and r.batch_id not in kept and (r.artifacts.location or "local") == target.host
        }
    )
    if not gone:
        return
    try:
        target.remove_runs(job.workspace, gone)
    except LensError as exc:  # the run itself succeeded: a folder left is no failure
        log.warning("could not remove old run folders on %s: %s", target.host, exc)

"""What follows a run, for ``profile`` (``runner.py``) and ``run`` (``script.py``)
alike: the batch document → results merged across ranks, stamped, analysed, stored
→ the run folders no stored result names removed on the target that holds them.

A step one path does not take is an argument it passes, never a line it lacks:

* ``device_lines``: per-line device time from the Neuron device profiles the
  harness listed (``device_profile.fill``);
* ``source``: the source as the run measured it, so a fix comes with its edit
  (``analysis/fixes``); ``None``: no edits (a script's findings: ``fix`` measures
  an edit by running a marked function);
* ``unstored``: what becomes of the run folder of a run not stored (``store`` is
  ``None``): ``"remove"``, or ``"keep"`` where the caller still reads it or removes
  it itself (``remove_own_folder``).

A run that fails, is cancelled or times out, before its batch arrives or while it
is finished, leaves no run folder either (``run_folder_removed_on_failure``);
``TRAINIUM_LENS_KEEP_RUNS`` keeps them all.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

from trainium_lens.analysis.findings.analyze import analyze
from trainium_lens.analysis.fixes.attach import with_edits
from trainium_lens.analysis.reconcile import reconcile
from trainium_lens.engine.device_profile import fill as fill_neuron_lines
from trainium_lens.engine.fix_source import SourceReader
from trainium_lens.errors import LensError, NotStored, TargetError
from trainium_lens.model.codec import ResultError
from trainium_lens.model.ranks import merge_document
from trainium_lens.model.result import Batch, GitState, Result
from trainium_lens.model.store import RunStore
from trainium_lens.targets.base import Target

log = logging.getLogger(__name__)

#: Set (to anything) to keep the run folders of runs that are not stored.
KEEP_RUNS_ENV = "TRAINIUM_LENS_KEEP_RUNS"

Unstored = Literal["keep", "remove"]


def finish(
    document: dict,
    *,
    target: Target,
    workspace: Path,
    batch_id: str,
    git: GitState,
    store: RunStore | None,
    device_lines: bool,
    source: SourceReader | None,
    unstored: Unstored,
) -> list[Result]:
    """The batch ``document`` the run on ``target`` wrote, as analysed results
    (file order), stored when ``store`` is given. ``git`` is the workspace's state
    when the run began (an edit during it must not relabel it). A store that cannot
    be written raises ``NotStored``, which carries the results (the run folder stays:
    the caller shows them)."""
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
        if device_lines:  # xla on Trn1, TorchNeuron: from the Parquet folders the harness listed
            fill_neuron_lines(result, functools.partial(target.fetch, workspace=workspace))
        result.reconciliation = reconcile(result)  # against the unprofiled wall / device span
        # fixes as edits of the source the run measured (analysis/fixes)
        edits = None if source is None else functools.partial(with_edits, read=source)
        result.findings = analyze(result, edits=edits)
    if store is None:
        if unstored == "remove":  # no stored result will ever name its folder
            remove_own_folder(target, workspace, batch_id)
        return batch.results
    for result in batch.results:
        try:
            store.save(result)
        except OSError as exc:  # read-only or full disk: say where, keep the rest
            raise NotStored(
                f"cannot store the result in {store.runs}: {exc.strerror or exc}", batch.results
            ) from None
        except LensError as exc:
            raise NotStored(str(exc), batch.results) from None
    prune_run_folders(target, workspace, store)
    return batch.results


@contextlib.contextmanager
def run_folder_removed_on_failure(target: Target, workspace: Path, batch_id: str) -> Iterator[None]:
    """Around a run and its ``finish``: a run that fails, is cancelled or times out
    leaves no run folder (no result will ever name it). ``NotStored`` is no failure:
    its results are shown, and their traces with them."""
    try:
        yield
    except NotStored:
        raise
    except BaseException:
        remove_own_folder(target, workspace, batch_id)
        raise


def remove_own_folder(target: Target, workspace: Path, batch_id: str) -> None:
    """This run's folder on ``target``, for a run no stored result will name (it
    failed, was cancelled, or is not stored): nothing else would remove it."""
    if os.environ.get(KEEP_RUNS_ENV):
        return
    try:
        target.remove_runs(workspace, [batch_id])
    except Exception as exc:  # noqa: BLE001 - a folder left is no reason to hide the run's own error
        log.warning("could not remove the run folder %s on %s: %s", batch_id, target.host, exc)


def prune_run_folders(target: Target, workspace: Path, store: RunStore) -> None:
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
        target.remove_runs(workspace, gone)
    except LensError as exc:  # the run itself succeeded: a folder left is no failure
        log.warning("could not remove old run folders on %s: %s", target.host, exc)

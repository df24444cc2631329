"""One profile run, end to end: target → batch → analysis → store.

The CLI and the language server both call ``profile``; neither knows how a
target reaches its host or how results are stored.
"""

from __future__ import annotations

import threading

from trainium_lens.engine.finish import finish, run_folder_removed_on_failure
from trainium_lens.engine.finish import remove_own_folder as remove_folder
from trainium_lens.engine.fix_source import SourceReader
from trainium_lens.engine.provenance import git_state
from trainium_lens.engine.rank_events import RankEvents
from trainium_lens.errors import TimedOut
from trainium_lens.model.job import Job
from trainium_lens.model.result import Result
from trainium_lens.model.store import RunStore
from trainium_lens.targets.base import EventSink, Target


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
    a failed, cancelled or timed-out run leaves the store exactly as it was (and
    no run folder). A store that cannot be written raises ``NotStored``, which
    carries the results. Run folders of results the store pruned go too, on the
    target that holds them. A run not stored keeps its folder: the caller reads it
    or removes it (``remove_own_folder``).
    """
    events = RankEvents(on_event or (lambda _event: None))  # torchrun jobs: one rank's progress
    git = git_state(job.workspace, job.file)  # before the run: an edit during it must not relabel it
    # the source as the run measures it: a fix's edit is built against this text
    read = SourceReader(job.workspace, {job.file})
    try:
        with run_folder_removed_on_failure(target, job.workspace, job.batch_id):
            document = target.run(job, events, cancel, timeout)
            return finish(
                document,
                target=target,
                workspace=job.workspace,
                batch_id=job.batch_id,
                git=git,
                store=store,
                device_lines=True,
                source=read,
                unstored="keep",
            )
    except TimedOut as exc:  # a hung rank: say which, and where it waited
        raise TimedOut(events.explain(str(exc))) from None


def remove_own_folder(job: Job, target: Target) -> None:
    """``job``'s run folder on ``target``, for a run not stored (``profile --no-store``)."""
    remove_folder(target, job.workspace, job.batch_id)

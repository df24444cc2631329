"""Where a run's trace is on this machine: the run's own file, or a copy fetched
from the host that made it into the workspace's artifacts cache.

The result naming the trace is untrusted (``model/paths.py``): a local trace is
read only from a run folder of this workspace, a fetched copy lands only inside
``<workspace>/.trainium-lens/artifacts/<run_id>/``, and with ``remote=False``
(the editor in Restricted Mode) nothing reaches a host at all.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from trainium_lens.errors import TargetError
from trainium_lens.model.job import workspace_id
from trainium_lens.model.paths import (
    UnsafePath,
    check_run_id,
    in_workspace_folder,
    local_run_file,
    plain_name,
)
from trainium_lens.model.result import Result
from trainium_lens.model.store import ARTIFACTS_DIR, STORE_DIR, write_ignore
from trainium_lens.traces.chrome import TraceError


class Fetcher(Protocol):
    """What fetching a trace needs of a target (``targets.base.Target`` is one)."""

    def fetch(self, remote_path: str, dest: Path, *, workspace: Path) -> Path: ...

    def close(self) -> None: ...


def artifacts_cache(workspace: Path, run_id: str) -> Path:
    """Artifacts fetched from a host land here (git-ignored with the runs)."""
    try:
        check_run_id(run_id)
    except UnsafePath as err:
        raise TraceError(str(err)) from None
    return Path(workspace) / STORE_DIR / ARTIFACTS_DIR / run_id


def local_trace_path(
    result: Result,
    workspace: Path,
    target_factory: Callable[[str], Fetcher] | None = None,
    *,
    remote: bool = True,
) -> Path:
    """A local path to ``result``'s trace, fetched from its host on first use.

    ``target_factory(host)`` makes the Target that can fetch from
    ``artifacts.location`` (the caller's: traces sit below the targets);
    ``remote=False`` refuses to fetch (only traces already here are read).
    """
    art = result.artifacts
    if not art.trace:
        raise TraceError(f"run {result.run_id} has no trace (artifacts.trace is empty)")
    if art.location in ("", "local"):
        try:
            path = local_run_file(art.trace, workspace_id(Path(workspace)))
        except UnsafePath:
            raise TraceError(
                f"run {result.run_id} names a trace outside this workspace's run folders "
                f"({art.trace[:200]}): not opened"
            ) from None
        if not path.is_file():
            raise TraceError(f"the trace of run {result.run_id} is gone: {path}")
        return path
    try:
        cached = artifacts_cache(workspace, result.run_id) / plain_name(art.trace, "trace file name")
        in_workspace_folder(cached, workspace, STORE_DIR)
    except UnsafePath as err:
        raise TraceError(f"run {result.run_id}: {err}: not fetched") from None
    if cached.is_file():
        return cached
    if not remote:
        raise TraceError(
            f"the trace of run {result.run_id} is on {art.location}: fetching it is off in "
            f"Restricted Mode (trust the workspace, or fetch it with `trainium-lens fetch`)"
        )
    if target_factory is None:  # the caller (a layer above the targets) names how to reach hosts
        raise TraceError(
            f"the trace of run {result.run_id} is on {art.location}: no way to fetch it was given"
        )
    write_ignore(Path(workspace) / STORE_DIR)
    target = target_factory(art.location)
    try:
        fetched = Path(
            target.fetch(art.trace, cached, workspace=Path(workspace))
        )  # dest: the copy's own path
    except TargetError:
        if cached.is_file():  # another request fetched it meanwhile
            return cached
        _remove_if_empty(cached.parent)
        raise
    finally:
        target.close()
    if not fetched.is_file():
        raise TraceError(f"fetching {art.trace} from {art.location} gave no file")
    return fetched


def _remove_if_empty(folder: Path) -> None:
    try:
        folder.rmdir()
    except OSError:
        pass  # not empty (another copy is there), or gone

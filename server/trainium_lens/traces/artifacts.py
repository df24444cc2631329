"""Where a run's trace is on this machine: the run's own file, or a copy fetched
from the host that made it into the workspace's artifacts cache."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from trainium_lens.model.result import Result
from trainium_lens.traces.chrome import TraceError

if TYPE_CHECKING:
    from trainium_lens.targets.base import Target


def artifacts_cache(workspace: Path, run_id: str) -> Path:
    """Artifacts fetched from a host land here (git-ignored with the runs)."""
    return Path(workspace) / ".trainium-lens" / "artifacts" / run_id


def local_trace_path(
    result: Result, workspace: Path, target_factory: Callable[[str], Target] | None = None
) -> Path:
    """A local path to ``result``'s trace, fetched from its host on first use.

    ``target_factory(host)`` makes the Target that can fetch from
    ``artifacts.location`` (the default reads the user's SSH config).
    """
    art = result.artifacts
    if not art.trace:
        raise TraceError(f"run {result.run_id} has no trace (artifacts.trace is empty)")
    if art.location in ("", "local"):
        path = Path(art.trace)
        if not path.is_file():
            raise TraceError(f"the trace of run {result.run_id} is gone: {path}")
        return path
    cache = artifacts_cache(workspace, result.run_id)
    cached = cache / Path(art.trace).name
    if cached.is_file():
        return cached
    if target_factory is None:
        from trainium_lens.targets import make_target

        def target_factory(host: str) -> Target:
            return make_target(host)

    target = target_factory(art.location)
    try:
        fetched = Path(target.fetch(art.trace, cached))  # dest: the copy's own path
    finally:
        target.close()
    if not fetched.is_file():
        raise TraceError(f"fetching {art.trace} from {art.location} gave no file")
    return fetched

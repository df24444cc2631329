"""``latest`` / ``latest~N``: a function's stored runs by age, as git names commits.

``latest`` is the newest stored run of a function, ``latest~1`` the one before
it. Which function: ``FILE [FUNCTION]`` when given (a file with one profiled
function needs no name; a name alone is looked up in every file), else the
function of the newest run in the store — so ``show latest`` is what was just
profiled and ``compare latest~1 latest`` what the last change did to it.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

from trainium_lens.errors import UsageError
from trainium_lens.model.result import Result
from trainium_lens.model.store import RunStore

_LATEST = re.compile(r"^latest(?:~(\d+))?$")


def back(ref: str) -> int | None:
    """``latest`` → 0, ``latest~2`` → 2; None for anything else (a run id, a file)."""
    m = _LATEST.match(ref.strip())
    if not m:
        return None
    return int(m.group(1) or 0)


def workspace_file(file: str, workspace: Path) -> str:
    """FILE as results name it: relative to the workspace, ``/`` separators. A path
    that exists is resolved (relative to the current folder); otherwise it is taken
    as already relative to the workspace."""
    path = Path(file).expanduser()
    if path.exists():
        try:
            return str(PurePosixPath(*path.resolve().relative_to(workspace).parts))
        except ValueError:
            raise UsageError(f"{file} is not inside the workspace {workspace}") from None
    return str(PurePosixPath(file))


def choose(store: RunStore, file: str | None, function: str | None) -> tuple[str, str]:
    """(file, function) whose history ``latest~N`` indexes."""
    runs = store.load_all()
    if file is not None:
        runs = [r for r in runs if r.function.file == file]
    if function is not None:
        runs = [r for r in runs if r.function.name == function]
    if not runs:
        what = "::".join(x for x in (file, function) if x) or "any function"
        raise UsageError(f"no stored runs of {what} in {store.runs}")
    keys = {(r.function.file, r.function.name) for r in runs}
    if function is not None and len(keys) > 1:
        files = ", ".join(sorted(f for f, _ in keys))
        raise UsageError(f"{function} was profiled in several files ({files}): name the FILE too")
    newest = runs[-1]  # load_all is oldest first
    return newest.function.file, newest.function.name


def pick(store: RunStore, ref: str, file: str | None = None, function: str | None = None) -> Result:
    """The run ``ref`` (``latest``/``latest~N``) names."""
    steps = back(ref)
    if steps is None:
        raise UsageError(f"not latest or latest~N: {ref!r}")
    key_file, key_function = choose(store, file, function)
    history = store.history(key_file, key_function)
    if steps >= len(history):
        raise UsageError(
            f"{ref}: {key_file}::{key_function} has {len(history)} stored run"
            f"{'s' if len(history) != 1 else ''} (latest~{len(history) - 1} is the oldest)"
        )
    return history[-1 - steps]

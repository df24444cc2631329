"""What a run argument names: a result ``.json`` file, a run id (or a unique
prefix, or a batch id: every function of that run), or ``latest`` / ``latest~N``,
a function's stored runs by age, as git names commits — for ``show``,
``compare``, ``check --baseline``, ``export`` and ``explorer``.

``latest`` is the newest stored run of a function, ``latest~1`` the one before
it. Which function: ``FILE [FUNCTION]`` when given (a file with one profiled
function needs no name; a name alone is looked up in every file), else the
function of the newest run in the store — so ``show latest`` is what was just
profiled and ``compare latest~1 latest`` what the last change did to it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path, PurePosixPath

from trainium_lens.cli.common import workspace_path
from trainium_lens.errors import UsageError
from trainium_lens.model.codec import ResultError, refuse_constant
from trainium_lens.model.result import MAX_RESULT_BYTES, Result, load, read_regular
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


def load_file(path: Path) -> list[Result]:
    """One result, or the list ``profile --json`` writes for several functions."""
    try:  # a regular file only, read bounded (a committed baseline may be a link to /dev/zero)
        data = json.loads(
            read_regular(path, MAX_RESULT_BYTES).decode("utf-8"), parse_constant=refuse_constant
        )
    except FileNotFoundError:
        raise UsageError(f"no such file: {path}") from None
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    except ResultError as exc:  # not a regular file (named), or NaN/Infinity in the text
        raise UsageError(str(exc) if str(exc).startswith(str(path)) else f"{path}: {exc}") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except RecursionError:
        raise UsageError(f"{path}: JSON nested too deeply to be a result") from None
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    except ValueError as exc:  # an integer past the parser's digit limit
        raise UsageError(f"{path}: {' '.join(str(exc).split())[:200]}") from None
    try:
        if isinstance(data, list):
            if not data:
                raise ResultError("an empty list")
            return [Result.from_dict(item) for item in data]
        return [load(path)]
    except ResultError as exc:
        raise UsageError(f"{path}: {exc}") from None


def store_for(workspace: str | None) -> RunStore:
    root = workspace_path(workspace)
    return RunStore(root)


def resolve_many(
    ref: str, workspace: str | None, file: str | None = None, function: str | None = None
) -> list[Result]:
    path = Path(ref).expanduser()
    if back(ref) is not None and not path.is_file():
        root = workspace_path(workspace)
        rel = workspace_file(file, root) if file else None
        return [pick(RunStore(root), ref, rel, function)]
    if file or function:
        raise UsageError(f"FILE and FUNCTION go with latest or latest~N, not with {ref!r}")
    if path.is_file() or ref.endswith(".json"):
        return load_file(path)
    store = store_for(workspace)
    try:
        return [store.get(ref)]
    except UsageError as err:
        if "ambiguous" not in str(err):
            raise
        batch = [r for r in store.load_all() if r.run_id.startswith(ref)]
        if len({r.batch_id for r in batch}) != 1:
            raise
        return sorted(
            batch,
            key=lambda r: int(r.run_id.rsplit("-", 1)[-1]) if r.run_id.rsplit("-", 1)[-1].isdigit() else 0,
        )


def resolve(ref: str, workspace: str | None, file: str | None = None, function: str | None = None) -> Result:
    """Exactly one result (for ``compare``)."""
    results = resolve_many(ref, workspace, file, function)
    if len(results) != 1:
        raise UsageError(f"{ref} holds {len(results)} results: name one run id")
    return results[0]


def stored(workspace: str | None, file: str | None, function: str | None) -> tuple[RunStore, list[Result]]:
    root = workspace_path(workspace)
    store = RunStore(root)
    results = store.load_all()
    if file is not None:
        rel = workspace_file(file, root)
        results = [r for r in results if r.function.file == rel]
    if function is not None:
        results = [r for r in results if r.function.name == function]
    return store, results

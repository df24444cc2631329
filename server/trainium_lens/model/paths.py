"""What a stored result may name, checked before anything uses it.

A result file is data anyone can write: a repository can commit one under
``.trainium-lens/runs/``, hand-edited or crafted. Everything the core derives
from one goes through here first:

* run and batch ids are plain names (``RUN_ID``): letters, digits, ``.``, ``_``
  and ``-``, no ``..``, so joined to a folder they stay in it;
* a local path made from a result (the artifacts cache, a fetched trace) must
  stay inside the folder it is meant for *after* resolving symlinks: a committed
  symlink (``.trainium-lens/artifacts -> ~``) cannot carry a write out;
* a trace the result says is already on this machine is read only from a run
  folder of this workspace (``<cache>/<workspace id>/runs/<batch>/...``, the
  layout ``targets/local.py`` writes), wherever the cache is.

docs/architecture.md, "Stored results are untrusted", lists what this covers.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

#: A run or batch id: ``20261129-101500-3f2a-0``, ``...-0.rank1``.
RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


class UnsafePath(ValueError):
    """A name or path from a result that would leave the folder it belongs in."""


def is_run_id(value: object) -> bool:
    return isinstance(value, str) and RUN_ID.fullmatch(value) is not None and ".." not in value


def check_run_id(value: object, what: str = "run id") -> str:
    if not is_run_id(value):
        raise UnsafePath(f"not a valid {what}: {str(value)[:80]!r}")
    return value  # type: ignore[return-value]


def plain_name(path: str, what: str = "file name") -> str:
    """The last part of a (POSIX) path, when it is a plain file name."""
    name = PurePosixPath(path).name
    if not is_run_id(name):
        raise UnsafePath(f"not a plain {what}: {path[:120]!r}")
    return name


def in_workspace_folder(path: Path, workspace: Path, folder: str) -> Path:
    """``path`` with symlinks resolved, when that lies inside ``<workspace>/<folder>``
    with only the workspace itself resolved: a symlink anywhere below it (a
    committed ``.trainium-lens`` or ``artifacts`` link) that leads elsewhere
    fails the check. Raises ``UnsafePath`` otherwise."""
    root = Path(workspace).resolve() / folder
    resolved = Path(path).resolve()
    if resolved != root and not resolved.is_relative_to(root):
        raise UnsafePath(f"{path} is outside {root}")
    return resolved


def local_run_file(path: str, workspace_id: str) -> Path:
    """A path a result says is on this machine, resolved, when it is a run folder
    of the workspace ``workspace_id`` or lies in one: ``.../<workspace_id>/runs/<batch>[/...]``."""
    resolved = Path(path).resolve()
    parts = resolved.parts
    for i in range(len(parts) - 2):
        if parts[i] == workspace_id and parts[i + 1] == "runs" and is_run_id(parts[i + 2]):
            if all(is_run_id(p) for p in parts[i + 3 :]):
                return resolved
    raise UnsafePath(f"{path} is not in a run folder of this workspace")

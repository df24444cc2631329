"""Files of included packages (``--include``/``trainiumLens.include``) in the editor.

A result names an included file by its module path (``torch/nn/functional.py``)
and records where it lay on the host (``Result.library_files``). When the user
opens such a file (go to definition into site-packages), the document is
matched to that module path so its hints, hover and heat show; a result file
that is not under the workspace maps back to the installed file's URI.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from trainium_lens.model.result import Result

if TYPE_CHECKING:
    from trainium_lens.lsp.runs import RunIndex


def is_library_rel(rel: str) -> bool:
    """A workspace-relative path that is not the user's code (a venv inside the workspace)."""
    parts = rel.split("/")
    return ".venv" in parts or "site-packages" in parts or "dist-packages" in parts


def is_library_path(path: Path) -> bool:
    """An absolute path inside an installed package's folder (site-packages, dist-packages)."""
    return "site-packages" in path.parts or "dist-packages" in path.parts


def _latest(index: RunIndex) -> Iterable[Result]:
    index.refresh()
    for runs in list(index._by_function.values()):  # noqa: SLF001 - the index's own map
        if runs:
            yield runs[-1]


def module_path_for(path: Path, index: RunIndex) -> str | None:
    """The module path a result uses for the open file ``path``, if any result
    of this workspace recorded one: the same file on this host, else the same
    module path at the end of ``path`` (the package installed here too)."""
    posix = path.as_posix()
    suffix_match = None
    for result in _latest(index):
        for lib in result.library_files:
            if Path(lib.path) == path:
                return lib.file
            if suffix_match is None and posix.endswith("/" + lib.file):
                suffix_match = lib.file
    return suffix_match


def installed_path(file: str, index: RunIndex) -> Path | None:
    """Where the included file ``file`` lies here (a local run's record)."""
    for result in _latest(index):
        for lib in result.library_files:
            if lib.file == file and Path(lib.path).is_file():
                return Path(lib.path)
    return None

"""The workspace's stored runs: ``<workspace>/.trainium-lens/runs/<run_id>.json``.

One file per result, written atomically (``result.save``), so a crash or a
failed run never leaves half a file and never touches earlier results. Each
profiled function keeps its last ``history`` runs; older ones are pruned when a
new one is saved. A file that cannot be read (corrupt, hand-edited, written by a
newer Trainium Lens) is skipped with a warning: one bad file must not hide the
others or crash the editor.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from trainium_lens.errors import LensError, UsageError
from trainium_lens.model.result import Result, ResultError, load, save

log = logging.getLogger(__name__)

STORE_DIR = ".trainium-lens"
RUNS_DIR = "runs"


class RunStore:
    def __init__(self, workspace: str | os.PathLike, history: int = 20) -> None:
        self.workspace = Path(workspace)
        self.root = self.workspace / STORE_DIR
        self.runs = self.root / RUNS_DIR
        self.history_size = max(1, int(history))
        #: (path, reason) of the files the last ``load_all`` skipped.
        self.skipped: list[tuple[Path, str]] = []
        # path -> (mtime_ns, size, Result): the editor asks often, files rarely change.
        self._cache: dict[Path, tuple[int, int, Result]] = {}

    # -- writing ---------------------------------------------------------------
    def path_for(self, run_id: str) -> Path:
        if not run_id or "/" in run_id or "\\" in run_id or run_id.startswith("."):
            raise UsageError(f"not a run id: {run_id!r}")
        return self.runs / f"{run_id}.json"

    def save(self, result: Result) -> Path:
        self._ensure_root()
        path = save(result, self.path_for(result.run_id))
        self._prune(result.function.file, result.function.name)
        return path

    def _ensure_root(self) -> None:
        self.runs.mkdir(parents=True, exist_ok=True)
        ignore = self.root / ".gitignore"
        if not ignore.exists():  # results are local state, never committed
            try:
                ignore.write_text("*\n", encoding="utf-8")
            except OSError:
                pass

    def _prune(self, file: str, function: str) -> None:
        runs = self.history(file, function)
        for old in runs[: max(0, len(runs) - self.history_size)]:
            try:
                self.path_for(old.run_id).unlink()
            except OSError as exc:
                log.warning("cannot prune %s: %s", old.run_id, exc)

    # -- reading ---------------------------------------------------------------
    def _files(self) -> list[Path]:
        try:
            return sorted(p for p in self.runs.glob("*.json") if not p.name.startswith("."))
        except OSError:
            return []

    def _read(self, path: Path) -> Result:
        stat = path.stat()
        cached = self._cache.get(path)
        if cached and cached[0] == stat.st_mtime_ns and cached[1] == stat.st_size:
            return cached[2]
        result = load(path)
        self._cache[path] = (stat.st_mtime_ns, stat.st_size, result)
        return result

    def load_all(self) -> list[Result]:
        """Every readable stored result, oldest first."""
        results: list[Result] = []
        skipped: list[tuple[Path, str]] = []
        for path in self._files():
            try:
                results.append(self._read(path))
            except (ResultError, OSError) as exc:
                skipped.append((path, str(exc)))
                log.warning("skipping stored run %s: %s", path.name, exc)
        self.skipped = skipped
        live = set(self._files())
        for gone in [p for p in self._cache if p not in live]:
            del self._cache[gone]
        results.sort(key=_order)
        return results

    def get(self, run_id: str) -> Result:
        """The stored result ``run_id``, or the only one whose id starts with it."""
        exact = self.runs / f"{run_id}.json"
        if run_id and exact.is_file():
            return self._load_one(exact)
        matches = [p for p in self._files() if p.stem.startswith(run_id)] if run_id else []
        if not matches:
            raise UsageError(f"no stored run {run_id!r} in {self.runs}")
        if len(matches) > 1:
            names = ", ".join(p.stem for p in matches[:4])
            more = "" if len(matches) <= 4 else f" and {len(matches) - 4} more"
            raise UsageError(f"run id {run_id!r} is ambiguous: {names}{more}")
        return self._load_one(matches[0])

    def _load_one(self, path: Path) -> Result:
        try:
            return self._read(path)
        except (ResultError, OSError) as exc:
            raise LensError(str(exc)) from None

    def history(self, file: str, function: str) -> list[Result]:
        """Stored runs of one function, oldest first."""
        return [r for r in self.load_all() if r.function.file == file and r.function.name == function]

    def latest(self, file: str, function: str) -> Result | None:
        runs = self.history(file, function)
        return runs[-1] if runs else None


def _order(result: Result) -> tuple[str, str]:
    # created_at is ISO 8601 UTC (sorts as text); run ids break ties in batch order.
    return (result.created_at, result.run_id)

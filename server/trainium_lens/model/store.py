"""The workspace's stored runs: ``<workspace>/.trainium-lens/runs/<run_id>.json``.

One file per result, written atomically (``result.save``), so a crash or a
failed run never leaves half a file and never touches earlier results. Each
profiled function keeps its last ``history`` runs; older ones are pruned when a
new one is saved. A file that cannot be read (corrupt, hand-edited, written by a
newer Trainium Lens, not UTF-8, nested past the JSON parser's depth: any damage)
is skipped with one warning per file: one bad file must not hide the others or
crash the editor.

Result files are untrusted (a repository can commit one): ids are checked
(``model/paths.py``) before they become file names, and the store writes only
inside ``<workspace>/.trainium-lens/`` (a committed symlink leading out of it
is refused). Pruning a result also removes what was made for it here (its
fetched artifacts); ``pruned`` lists the results pruned, so ``engine/finish.py`` can
remove their run folders on the target that holds them.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from datetime import datetime, timezone
from pathlib import Path

from trainium_lens.errors import LensError, UsageError
from trainium_lens.model.codec import ResultError
from trainium_lens.model.paths import RUN_ID, UnsafePath, in_workspace_folder, is_run_id
from trainium_lens.model.result import Result, load, save, timestamp

log = logging.getLogger(__name__)

STORE_DIR = ".trainium-lens"
RUNS_DIR = "runs"
ARTIFACTS_DIR = "artifacts"
#: How far in the future a stored result's ``created_at`` may be (clocks differ a little).
CLOCK_SKEW_S = 3600.0


IGNORE = "*\n"


def write_ignore(root: Path) -> None:
    """``<root>/.gitignore`` ignoring everything: results and fetched artifacts
    are local state, never committed. Written whatever a repository committed
    there (an empty file, a link), so a copy never shows up to ``git add -A``."""
    ignore = root / ".gitignore"
    try:
        root.mkdir(parents=True, exist_ok=True)
        if not ignore.is_symlink() and ignore.is_file() and ignore.read_text(encoding="utf-8") == IGNORE:
            return
        if ignore.is_symlink() or ignore.exists():
            ignore.unlink()
        fd = os.open(ignore, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(IGNORE)
    except (OSError, UnicodeDecodeError) as exc:
        log.warning("cannot write %s: %s", ignore, exc)


class RunStore:
    def __init__(self, workspace: str | os.PathLike, history: int = 20) -> None:
        self.workspace = Path(workspace)
        self.root = self.workspace / STORE_DIR
        self.runs = self.root / RUNS_DIR
        self.history_size = max(1, int(history))
        #: (path, reason) of the files the last ``load_all`` skipped.
        self.skipped: list[tuple[Path, str]] = []
        self._named: set[tuple[Path, int, int]] = set()  # damaged files already warned about
        #: Results ``save`` pruned and nobody took yet (``take_pruned``).
        self.pruned: list[Result] = []
        # path -> (mtime_ns, size, Result): the editor asks often, files rarely change.
        self._cache: dict[Path, tuple[int, int, Result]] = {}

    # -- writing ---------------------------------------------------------------
    def path_for(self, run_id: str) -> Path:
        if not is_run_id(run_id):
            raise UsageError(f"not a run id: {str(run_id)[:80]!r}")
        return self.runs / f"{run_id}.json"

    def save(self, result: Result) -> Path:
        self._ensure_root()
        path = self.path_for(result.run_id)
        self._stamp(result)
        save(result, path)
        self._prune(result.function.file, result.function.name, keep=result.run_id)
        return path

    def _stamp(self, result: Result) -> None:
        """Runs are ordered (``latest``, pruning) by when this store saved them:
        a result that says it was made in the future (a host with a wrong clock)
        or before the newest stored run of its function is dated now, so the
        run just made is the latest one, whatever the host's clock or the
        repository's committed results say."""
        now = time.time()
        when = timestamp(result.created_at)
        stored = [timestamp(r.created_at) or 0.0 for r in self.history(*_key(result))]
        if when is None or when > now + CLOCK_SKEW_S or (stored and when < max(stored)):
            result.created_at = datetime.fromtimestamp(max([now, *stored]), timezone.utc).isoformat(  # noqa: UP017
                timespec="microseconds"
            )

    def take_pruned(self) -> list[Result]:
        """The results pruned since the last call (their run folders may go now)."""
        out, self.pruned = self.pruned, []
        return out

    def _ensure_root(self) -> None:
        self._check_inside()  # before mkdir: a symlink must not get a folder made through it
        self.runs.mkdir(parents=True, exist_ok=True)
        self._check_inside()
        write_ignore(self.root)

    def _check_inside(self) -> None:
        try:
            in_workspace_folder(self.runs, self.workspace, STORE_DIR)
        except UnsafePath:
            raise LensError(
                f"{self.runs} leads outside {self.workspace / STORE_DIR} (a symlink?): "
                f"not storing results there"
            ) from None

    def _prune(self, file: str, function: str, keep: str) -> None:
        runs = [r for r in self.history(file, function) if r.run_id != keep]  # never the one just saved
        gone = []
        for old in runs[: max(0, len(runs) + 1 - self.history_size)]:
            try:
                self.path_for(old.run_id).unlink()
            except OSError as exc:
                log.warning("cannot prune %s: %s", old.run_id, exc)
                continue
            gone.append(old)
        if not gone:
            return
        self.pruned.extend(gone)
        batches = {r.batch_id for r in self.load_all()}
        for old in gone:
            names = {old.run_id} | {f"{old.run_id}.rank{r.rank}" for r in old.ranks}
            if old.batch_id and old.batch_id not in batches:  # `fetch`'s copy of the run folder
                names.add(old.batch_id)
            self._remove_artifacts(names)

    def _remove_artifacts(self, names: set[str]) -> None:
        """``artifacts/<name>`` for each name, only where the artifacts folder
        really is inside the workspace (a link in it is removed, not followed)."""
        root = self.root / ARTIFACTS_DIR
        try:
            in_workspace_folder(root, self.workspace, STORE_DIR)
        except UnsafePath:
            return
        for name in sorted(names):
            path = root / name
            try:
                if path.is_symlink() or path.is_file():
                    path.unlink()
                elif path.is_dir():
                    shutil.rmtree(path)
            except OSError as exc:
                log.warning("cannot remove the artifacts %s: %s", path, exc)

    # -- reading ---------------------------------------------------------------
    def _files(self) -> list[Path]:
        try:
            return sorted(p for p in self.runs.glob("*.json") if not p.name.startswith("."))
        except OSError:
            return []

    def _read(self, path: Path) -> Result:
        st = path.lstat()  # a link is not followed (load refuses anything but a regular file)
        cached = self._cache.get(path)
        if cached and cached[0] == st.st_mtime_ns and cached[1] == st.st_size:
            return cached[2]
        result = load(path)
        when = timestamp(result.created_at) or 0.0
        if when > time.time() + CLOCK_SKEW_S:  # it would be `latest` for ever, and prune every new run
            raise ResultError(f"{path}: created_at {result.created_at[:40]} is in the future, not read")
        self._cache[path] = (st.st_mtime_ns, st.st_size, result)
        return result

    def load_all(self) -> list[Result]:
        """Every readable stored result, oldest first."""
        results: list[Result] = []
        skipped: list[tuple[Path, str]] = []
        for path in self._files():
            try:
                results.append(self._read(path))
            except Exception as exc:  # noqa: BLE001 - any damage: skip the file, keep the rest
                reason = (
                    str(exc) if isinstance(exc, (ResultError, OSError)) else f"{type(exc).__name__}: {exc}"
                )
                skipped.append((path, reason))
                self._name_once(path, reason)
        self.skipped = skipped
        live = set(self._files())
        for gone in [p for p in self._cache if p not in live]:
            del self._cache[gone]
        results.sort(key=_order)
        return results

    def _name_once(self, path: Path, reason: str) -> None:
        """One warning per damaged file (per version of it), not one per reload."""
        try:
            st = path.lstat()
            key = (path, st.st_mtime_ns, st.st_size)
        except OSError:
            key = (path, 0, 0)
        if key not in self._named:
            self._named.add(key)
            log.warning("skipping stored run %s: %s", path.name, reason)

    def get(self, run_id: str) -> Result:
        """The stored result ``run_id``, or the only one whose id starts with it."""
        if not run_id or not RUN_ID.fullmatch(run_id) or ".." in run_id:
            raise UsageError(f"not a run id: {run_id[:80]!r} (letters, digits, '.', '_' and '-')")
        exact = self.runs / f"{run_id}.json"
        if exact.is_file() or exact.is_symlink():
            return self._load_one(exact)
        matches = [p for p in self._files() if p.stem.startswith(run_id)]
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
        except (ResultError, OSError) as exc:  # the run named cannot be read: a usage error
            raise UsageError(str(exc)) from None
        except Exception as exc:  # noqa: BLE001 - any damage: one line, not a traceback
            raise UsageError(f"{path}: {type(exc).__name__}: {exc}") from None

    def history(self, file: str, function: str) -> list[Result]:
        """Stored runs of one function, oldest first."""
        return [r for r in self.load_all() if r.function.file == file and r.function.name == function]

    def latest(self, file: str, function: str) -> Result | None:
        runs = self.history(file, function)
        return runs[-1] if runs else None


def _key(result: Result) -> tuple[str, str]:
    return (result.function.file, result.function.name)


def _order(result: Result) -> tuple[float, str]:
    # created_at as a time (the store keeps it in save order: _stamp); run ids break
    # ties in batch order.
    return (timestamp(result.created_at) or 0.0, result.run_id)

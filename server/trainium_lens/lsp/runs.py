"""Run state: the workspace's stored runs and, per open document, where each
profiled line sits now and whether its figure is still fresh.

Results live on disk through ``store.RunStore`` (``.trainium-lens/runs/``), so
annotations survive a restart; ``RunIndex`` keeps them grouped per function in
memory and notices runs added by someone else (the CLI). ``DocumentRuns`` holds
one ``LineTracker`` per current result of a document and turns them into
``Annotation``s, cached per document version.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from trainium_lens.analysis.compare import match_lines
from trainium_lens.errors import LensError
from trainium_lens.lsp.tracking import LineTracker, is_stale
from trainium_lens.model.lines import LineStat
from trainium_lens.model.result import Finding, Result

log = logging.getLogger(__name__)


_TIMES: dict[tuple[str, str], dict[tuple[str, int], float]] = {}


def line_times(before: Result, after: Result) -> dict[tuple[str, int], float]:
    """For each ``(file, line)`` of ``after``: what the same line cost a step in
    ``before`` — forward + backward (``LineStat.time_us``; forward alone for a
    run without backward), the figure the hints show — paired as
    ``analysis.compare.match_lines`` pairs them (only within one file). Cached
    per pair: stored runs never change, and the hints ask on every view."""
    key = (before.run_id, after.run_id)
    cached = _TIMES.get(key)
    if cached is not None:
        return cached
    if len(_TIMES) > 256:
        _TIMES.clear()
    out = {(a.file, a.line): b.time_us for b, a, _status in match_lines(before.lines, after.lines) if a and b}
    _TIMES[key] = out
    return out


class RunIndex:
    """The stored runs of one workspace, grouped by (file, function), oldest first."""

    def __init__(self, workspace: Path, history: int = 20):
        from trainium_lens.model.store import RunStore

        self.workspace = workspace
        self.history_size = history
        self.store = RunStore(workspace, history=history)
        self.runs_dir = workspace / ".trainium-lens" / "runs"
        self._by_function: dict[tuple[str, str], list[Result]] = {}
        self._stamp: tuple | None = None
        self.generation = 0  # bumped whenever the set of runs changes
        #: Told once per stored file skipped (damaged, or over a bound the store
        #: keeps: ``model/result.MAX_RESULT_BYTES``), with the store's one line.
        self.on_skipped: Callable[[str], None] | None = None
        self._told: set[tuple[Path, str]] = set()

    def refresh(self) -> bool:
        """Reload when the runs folder changed on disk; True when it did."""
        try:
            stat = self.runs_dir.stat()
            stamp: tuple | None = (stat.st_mtime_ns, stat.st_ino)
        except OSError:
            stamp = None
        if stamp == self._stamp:
            return False
        self._stamp = stamp
        grouped: dict[tuple[str, str], list[Result]] = {}
        if stamp is not None:
            for result in self.store.load_all():
                grouped.setdefault((result.function.file, result.function.name), []).append(result)
            self._tell_skipped()
        for runs in grouped.values():
            runs.sort(key=lambda r: (r.created_at, r.run_id))
            del runs[: max(0, len(runs) - self.history_size)]
        self._by_function = grouped
        self.generation += 1
        return True

    def _tell_skipped(self) -> None:
        for path, reason in self.store.skipped:
            if (path, reason) in self._told or self.on_skipped is None:
                continue
            self._told.add((path, reason))
            try:
                self.on_skipped(f"stored run {path.name} skipped: {reason.removeprefix(f'{path}: ')}")
            except Exception:  # telling must not stop the runs from loading
                log.exception("telling a skipped run failed")

    def add(self, results: Sequence[Result]) -> None:
        """Runs this server just made (already saved by the runner)."""
        for result in results:
            runs = self._by_function.setdefault((result.function.file, result.function.name), [])
            if all(r.run_id != result.run_id for r in runs):
                runs.append(result)
            del runs[: max(0, len(runs) - self.history_size)]
        self.generation += 1
        try:  # our own write must not trigger a reload
            stat = self.runs_dir.stat()
            self._stamp = (stat.st_mtime_ns, stat.st_ino)
        except OSError:
            pass

    def history(self, file: str, function: str) -> list[Result]:
        return self._by_function.get((file, function), [])

    def functions(self, file: str) -> dict[str, list[Result]]:
        """Histories of the functions defined in ``file``."""
        return {fn: runs for (f, fn), runs in self._by_function.items() if f == file and runs}

    def current_touching(self, file: str) -> list[Result]:
        """The latest run of every function with a figure or finding in ``file``
        (a helper's lines can be annotated by a function of another file)."""
        out = []
        for (f, _fn), runs in self._by_function.items():
            if not runs:
                continue
            latest = runs[-1]
            if (
                f == file
                or any(s.file == file for s in latest.lines)
                or any(x.file == file for x in latest.findings)
            ):
                out.append(latest)
        return out

    def previous(self, result: Result) -> Result | None:
        runs = self.history(result.function.file, result.function.name)
        ids = [r.run_id for r in runs]
        if result.run_id in ids and ids.index(result.run_id) > 0:
            return runs[ids.index(result.run_id) - 1]
        return None


@dataclass(slots=True)
class AppliedFix:
    """A fix applied after its measurement held: where it went and what it measured."""

    text: str  # the first line of the replacement, stripped: how its line is found again
    near: int  # 0-based line where the edit started
    label: str  # the hint, from the measurement
    run_id: str  # the run the fix was measured against
    file: str  # the run's function: its next run supersedes the hint
    function: str
    tooltip: str = ""  # the whole verdict

    def line_in(self, doc_lines: Sequence[str]) -> int | None:
        """The line holding the replacement now (the nearest match to where it went)."""
        found = [i for i, ln in enumerate(doc_lines) if ln.strip() == self.text]
        return min(found, key=lambda i: abs(i - self.near)) if found else None


@dataclass(slots=True)
class Annotation:
    line: int  # 0-based, in the current document
    stat: LineStat
    result: Result
    stale: bool
    previous_us: float | None = None  # the same line's fwd+bwd in the function's previous run

    @property
    def time_us(self) -> float:
        """Self time (forward + backward + recompute), or total time (forward +
        backward) for a line whose cost is all in callees."""
        s = self.stat
        return s.time_us or (s.total_time_us + s.backward_total_time_us)

    @property
    def inclusive(self) -> bool:
        """``time_us`` is the line's total time: it has no self time of its own."""
        return not self.stat.time_us and self.time_us > 0


@dataclass
class PlacedFinding:
    line: int
    finding: Finding
    result: Result
    stale: bool


@dataclass
class Annotations:
    lines: list[Annotation]  # sorted by line, at most one per line
    by_line: dict[int, Annotation]
    findings: list[PlacedFinding]
    # Rendered views of these annotations (e.g. inlay hints per threshold),
    # built once and sliced per request; ``forget(lines)`` drops what typing
    # in those lines made out of date.
    views: dict = field(default_factory=dict)


class DocumentRuns:
    """Where the current results' lines sit in one open document."""

    def __init__(self, uri: str, file: str, index: RunIndex):
        self.uri = uri
        self.file = file  # relative to the workspace root, as results name it
        self.index = index
        self.trackers: dict[str, LineTracker] = {}  # run_id -> tracker
        # A failed run's error in this file: (0-based line, message, the profiled file).
        self.errors: list[tuple[int, str, str]] = []
        # Fixes applied in this document (lsp/features/fixes.py), each shown on its line
        # with its measured figures until the function is profiled again.
        self.applied: list[AppliedFix] = []
        self._cache: tuple[tuple, Annotations] | None = None
        self._dirty: set[int] = set()  # lines typed in since the cache was built
        self._prep: dict[str, list] = {}

    # -- following the document ------------------------------------------------
    def _wanted(self, result: Result) -> dict[int, str]:
        wanted = {s.line: s.text for s in result.lines if s.file == self.file}
        for finding in result.findings:
            if finding.file == self.file:
                wanted.setdefault(finding.line, "")
        return wanted

    def sync(self, doc_lines: Sequence[str]) -> list[Result]:
        """Track every current result (placing new ones), forget superseded ones."""
        current = self.index.current_touching(self.file)
        ids = {r.run_id for r in current}
        for run_id in list(self.trackers):
            if run_id not in ids:
                del self.trackers[run_id]
        for result in current:
            if result.run_id not in self.trackers:
                self.trackers[result.run_id] = LineTracker.place(self._wanted(result), doc_lines)
                self._cache = None
        return current

    def replace_all(self, doc_lines: Sequence[str]) -> None:
        """A whole-document change: place every result afresh."""
        self.trackers.clear()
        self._cache = None
        self.sync(doc_lines)

    def apply_change(self, start: tuple[int, int], end: tuple[int, int], text: str) -> None:
        for tracker in self.trackers.values():
            tracker.apply(start, end, text)
        moved = []
        for line, message, origin in self.errors:
            t = LineTracker({0: line})
            t.apply(start, end, text)
            now = t.current(0)
            if now is not None:
                moved.append((now, message, origin))
        self.errors = moved
        if self._cache is None:
            return
        if start[0] == end[0] and "\n" not in text:
            self._dirty.add(start[0])  # typing in a line: only its staleness can change
        elif not self._shift(self._cache[1]):
            self._cache = None  # a figure's line was deleted or joined: rebuild
        else:  # lines moved: those in the edited range may read differently now
            self._dirty.update(range(start[0], start[0] + text.count("\n") + 1))

    def _shift(self, annotations: Annotations) -> bool:
        """Move the cached annotations to their trackers' new lines; False
        when that is not a plain move (then the cache is rebuilt)."""
        trackers = self.trackers
        if len(trackers) == 1:  # the usual case: one function's run in this file
            get = next(iter(trackers.values())).pos.get
            new = [get(a.stat.line) for a in annotations.lines]
        else:
            new = [trackers[a.result.run_id].pos.get(a.stat.line) for a in annotations.lines]
        placed_lines = [line for line in new if line is not None]
        if len(placed_lines) != len(new):
            return False
        by_line = dict(zip(placed_lines, annotations.lines, strict=True))
        if len(by_line) != len(new):
            return False
        for placed in annotations.findings:
            if trackers[placed.result.run_id].pos.get(placed.finding.line) is None:
                return False
        for line, a in by_line.items():
            a.line = line
        for placed in annotations.findings:
            placed.line = trackers[placed.result.run_id].pos[placed.finding.line]
        annotations.by_line = by_line
        for view in annotations.views.values():
            view.moved()
        return True

    # -- what the features read ------------------------------------------------
    def _prepared(self, result: Result) -> list[tuple[int, str, LineStat, bool]]:
        """This file's lines of a result as (line, stripped text, stat, owned),
        once per result: rebuilt annotations after each keystroke stay cheap."""
        prepared = self._prep.get(result.run_id)
        if prepared is None:
            prepared = self._prep[result.run_id] = [
                (s.line, s.text.strip(), s, s.function == result.function.name)
                for s in result.lines
                if s.file == self.file
            ]
            if len(self._prep) > 64:
                self._prep = {k: v for k, v in self._prep.items() if k in self.trackers}
        return prepared

    def annotations(self, doc_lines: Sequence[str], version: int | None) -> Annotations:
        current = self.sync(doc_lines)
        key = (self.index.generation, tuple(sorted(self.trackers)))
        if self._cache is not None and self._cache[0] == key:
            if self._dirty:
                self._restale(self._cache[1], doc_lines)
            return self._cache[1]
        self._dirty = set()
        n = len(doc_lines)
        by_line: dict[int, Annotation] = {}
        rank: dict[int, tuple] = {}
        findings: list[PlacedFinding] = []
        for result in current:
            tracker = self.trackers[result.run_id]
            pos, touched = tracker.pos, tracker.touched
            previous = self.index.previous(result)
            before = line_times(previous, result) if previous else {}
            texts: dict[int, str] = {}
            for profiled, text, stat, owned in self._prepared(result):
                line = pos.get(profiled)
                if line is None:
                    continue
                if text:  # stale: the line no longer reads as profiled
                    stale = line >= n or doc_lines[line].strip() != text
                else:
                    stale = profiled in touched
                texts[profiled] = text
                # One figure per line: the function the line belongs to wins,
                # then the newest run.
                if line in rank:
                    order = (owned, result.created_at)
                    if rank[line] >= order:
                        continue
                    rank[line] = order
                elif len(current) > 1:
                    rank[line] = (owned, result.created_at)
                by_line[line] = Annotation(line, stat, result, stale, before.get((self.file, profiled)))
            for finding in result.findings:
                if finding.file != self.file:
                    continue
                line = pos.get(finding.line)
                if line is None:
                    continue
                now = doc_lines[line] if line < n else None
                stale = is_stale(texts.get(finding.line, ""), now, finding.line in touched)
                findings.append(PlacedFinding(line, finding, result, stale))
        lines = [by_line[k] for k in sorted(by_line)]
        out = Annotations(lines, by_line, findings)
        self._cache = (key, out)
        return out

    def _restale(self, annotations: Annotations, doc_lines: Sequence[str]) -> None:
        """Re-decide staleness on the lines typed in; nothing else moved."""
        dirty, self._dirty = self._dirty, set()
        n = len(doc_lines)
        for line in dirty:
            a = annotations.by_line.get(line)
            text = doc_lines[line] if line < n else None
            if a is not None:
                touched = a.stat.line in self.trackers[a.result.run_id].touched
                a.stale = is_stale(a.stat.text, text, touched)
            for placed in annotations.findings:
                if placed.line == line:
                    owner = annotations.by_line.get(line)
                    same = (
                        owner is not None
                        and owner.result is placed.result
                        and owner.stat.line == placed.finding.line
                    )
                    touched = placed.finding.line in self.trackers[placed.result.run_id].touched
                    placed.stale = is_stale(
                        owner.stat.text if owner is not None and same else "", text, touched
                    )
        for view in annotations.views.values():
            view.forget(dirty)

    def invalidate(self) -> None:
        self._cache = None


def pick_run(
    annotations: Annotations | None, runs: DocumentRuns | None, line: int | None
) -> tuple[Result, str | None, int | None]:
    """The run behind the editor line (and that line in the run's numbering), else
    the document's latest run with no line."""
    a = annotations.by_line.get(line) if annotations and line is not None else None
    if a is not None:
        return a.result, a.stat.file, a.stat.line
    current = runs.index.current_touching(runs.file) if runs else []
    if not current:
        raise LensError("no profile run for this file yet: run Profile on Trainium first")
    latest = max(current, key=lambda r: (r.created_at, r.run_id))
    return latest, None, None

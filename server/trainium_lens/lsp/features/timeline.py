"""``trainiumLens/timeline``: a run's trace, compact, for the built-in timeline panel.

Request ``{uri, line}`` (``line`` 0-based, where the line sits in the editor
now) → the trace of the run that annotates that line (else the file's latest
run), read through ``traces.chrome.parse_trace``:

``{title, file, line, run_id, backend, t0, lanes: [{name, kind, rows}],
names: [str], sources: [[file, line]], targets: [{uri, line}],
events: {lane, depth, start, dur, name, src, phase}, focus: {start, end} | null,
focusSrc}``

Events are column arrays (one list per field) with times in µs relative to
``t0`` (the trace clock of the first event) and names/sources as indexes into
the string tables: 100,000 events stay a few MB and decode fast in the
webview. ``targets[i]`` is where ``sources[i]`` sits in the editor now (the
document may have moved on since the run), so a click reveals the right line.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

from pygls.uris import to_fs_path

from trainium_lens.errors import LensError
from trainium_lens.lsp.runs import pick_run
from trainium_lens.lsp.state import LensServer, param
from trainium_lens.model.result import Result
from trainium_lens.traces.artifacts import local_trace_path
from trainium_lens.traces.chrome import Trace, load_trace
from trainium_lens.traces.ranks import merged_trace

log = logging.getLogger(__name__)

REQUEST = "trainiumLens/timeline"
PHASE_CODES = {"backward": 1, "recompute": 2}  # events.phase; 0: forward
CACHE_SIZE = 3  # parsed traces kept (a big one is tens of MB in memory)


class TraceCache:
    """Parsed traces by (run id, path), least recently used dropped first."""

    def __init__(self, size: int = CACHE_SIZE) -> None:
        self.size = size
        self._items: OrderedDict[tuple[str, str], Trace] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, run_id: str, path: Path) -> Trace:
        key = (run_id, str(path))
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
        trace = load_trace(path)
        with self._lock:
            self._items[key] = trace
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return trace


def payload(
    trace: Trace,
    result: Result,
    file: str | None,
    line: int | None,
    targets: dict[tuple[str, int], dict] | None = None,
) -> dict[str, Any]:
    """The panel's data for ``trace``, focused on ``file:line`` (run numbering)."""
    names: dict[str, int] = {}
    sources: dict[tuple[str, int], int] = {}
    cols: dict[str, list] = {k: [] for k in ("lane", "depth", "start", "dur", "name", "src", "phase")}
    t0 = trace.t0
    for ev in trace.events:
        cols["lane"].append(ev.lane)
        cols["depth"].append(ev.depth)
        cols["start"].append(round(ev.start - t0, 3))
        cols["dur"].append(round(ev.dur, 3))
        cols["name"].append(names.setdefault(ev.name, len(names)))
        cols["src"].append(-1 if ev.line is None else sources.setdefault(ev.line, len(sources)))
        # backward ops: src is the forward line that caused them
        cols["phase"].append(PHASE_CODES.get(ev.phase, 0) if ev.phase else 0)
    focus_src = sources.get((file, line), -1) if file is not None and line is not None else -1
    focus = None
    if focus_src >= 0:
        # The line's first range: zoomed there, one occurrence fills the view and
        # the status line counts every occurrence.
        first = next(
            (ev for ev in trace.events if ev.line == (file, line) and trace.lanes[ev.lane].kind == "lines"),
            None,
        )
        first = first or next(ev for ev in trace.events if ev.line == (file, line))
        focus = {"start": round(first.start - t0, 3), "end": round(first.start + first.dur - t0, 3)}
    targets = targets or {}
    return {
        "title": f"{result.function.file}::{result.function.name} · run {result.run_id} ({result.backend})",
        "file": file,
        "line": line,
        "run_id": result.run_id,
        "backend": result.backend,
        "t0": t0,
        "lanes": [{"name": lane.name, "kind": lane.kind, "rows": lane.rows} for lane in trace.lanes],
        "names": list(names),
        "sources": [list(src) for src in sources],
        "targets": [targets.get(src) for src in sources],
        "events": cols,
        "focus": focus,
        "focusSrc": focus_src,
    }


def targets_for(ls: LensServer, uri: str, result: Result, trace: Trace) -> dict[tuple[str, int], dict]:
    """Where each source line of the trace sits in the editor now."""
    runs = ls.document_runs(uri)
    tracker = runs.trackers.get(result.run_id) if runs else None
    workspace = runs.index.workspace if runs else None
    out: dict[tuple[str, int], dict] = {}
    for ev in trace.events:
        if ev.line is None or ev.line in out:
            continue
        file, number = ev.line
        if runs and file == runs.file:
            current = tracker.current(number) if tracker else None
            out[ev.line] = {"uri": uri, "line": current if current is not None else number - 1}
        elif workspace is not None:
            out[ev.line] = {"uri": ls.uri_for(workspace, file), "line": number - 1}
    return out


async def timeline(ls: LensServer, params: Any, cache: TraceCache) -> dict:
    uri, line = param(params, "uri"), param(params, "line")
    if not isinstance(uri, str) or (line is not None and not isinstance(line, int)):
        raise LensError(f"{REQUEST} takes {{uri, line}} (line 0-based)")
    runs = ls.document_runs(uri)
    if runs is None:
        raise LensError(f"not a file in a workspace: {to_fs_path(uri) or uri}")
    runs.index.refresh()
    result, file, run_line = pick_run(ls.annotations(uri), ls.document_runs(uri), line)
    where = ls.settings.where()  # the SSH options; the host is each run's own
    trusted = ls.settings.trusted  # Restricted Mode: traces already here only, no host is reached

    def load() -> Trace:  # off the event loop: a fetch over SSH, a big JSON parse
        from trainium_lens.targets.make import make_target

        def one(res: Result) -> Trace:
            path = local_trace_path(
                res,
                runs.index.workspace,
                lambda host: make_target(where.at(host)),
                remote=trusted,
            )
            return cache.get(res.run_id, path)

        return merged_trace(result, one) if result.ranks else one(result)  # torchrun: per rank

    trace = await asyncio.get_running_loop().run_in_executor(None, load)
    return payload(trace, result, file, run_line, targets_for(ls, uri, result, trace))


def register(server: LensServer) -> None:
    cache = TraceCache()

    @server.feature(REQUEST)
    async def on_timeline(ls: LensServer, params: Any) -> dict:
        try:
            return await timeline(ls, params, cache)
        except LensError as err:
            # A one-line reason the panel shows in place of the timeline.
            return {"error": str(err)}

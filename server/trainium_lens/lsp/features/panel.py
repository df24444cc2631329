"""``trainiumLens/runData``: everything the client's results panel draws, as JSON.

Request ``{uri, function?}`` → ``{result, comparison, diff, lines, roofline, markdown}``:
the function's latest result (op table, line table, findings: the result's
own JSON), the comparison of the file's variants (None below two), the diff
against the function's previous run (None without one), and where each
profiled line sits in the editor now (so a click reveals the right line), and
the roofline chart's points and the memory view (``lsp/present/roofline_chart.py``).
Every object with figures carries a ``shown`` map (field → text, ``model/figures.shown``):
the panel prints the server's text rather than formatting a second time.
Without ``function``: the most recently profiled function of the file. With
``baseline`` (a run id of that function, picked from ``trainiumLens/history``)
the diff is against that run instead of the previous one.

What is read from the editor's state (the runs, where each line sits now) is read
on the server's loop; the reply itself, a walk over the whole result, is built in
a worker thread, so a large stored result never holds up the other requests (hints,
hover) meanwhile. Stored results are bounded on reading (``model/result.py``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from trainium_lens.lsp.present import compare, roofline_chart
from trainium_lens.lsp.state import LensServer, param
from trainium_lens.model import figures
from trainium_lens.model.fit import mostly_fit_text

REQUEST = "trainiumLens/runData"


def run_data(ls: LensServer, params: Any) -> Callable[[], dict]:
    """What the panel draws, as a function to call off the loop: the runs and the
    lines' places are taken now, the reply is built when it is called."""
    uri, function = param(params, "uri"), param(params, "function")
    empty: dict[str, Any] = {
        "result": None,
        "comparison": None,
        "diff": None,
        "lines": [],
        "roofline": None,
        "markdown": None,
    }
    runs = ls.document_runs(uri) if isinstance(uri, str) else None
    if runs is None:
        return lambda: empty
    runs.index.refresh()
    histories = runs.index.functions(runs.file)
    if function:
        history = histories.get(function, [])
    else:
        latest = max(histories.values(), key=lambda h: (h[-1].created_at, h[-1].run_id), default=[])
        history = latest
    if not history:
        return lambda: empty
    result = history[-1]
    baseline = param(params, "baseline")
    before = next((r for r in history if r.run_id == baseline), None) if baseline else None
    if before is None and len(history) > 1:
        before = history[-2]
    if before is result:
        before = None
    variants = compare.file_variants(histories)
    annotations = ls.annotations(uri)
    placed = {a.stat.line: a for a in annotations.lines if a.result is result} if annotations else {}
    tracker = runs.trackers.get(result.run_id)
    lines = []
    for stat in result.lines:
        if stat.file != runs.file:
            continue
        a = placed.get(stat.line)
        current = tracker.current(stat.line) if tracker else None
        lines.append({"line": stat.line, "current": current, "stale": a.stale if a else current is None})

    def build() -> dict:
        return figures.shown(
            {
                "result": result.to_dict(),
                "comparison": compare.variants(variants),
                "diff": compare.diff(before, result) if before else None,
                "lines": lines,
                "roofline": roofline_chart.chart(result),  # the roofline chart and the memory view
                # a figure the fit to the wall supplied most of: the CLI's and the hover's words
                "mostly_fit": mostly_fit_text(result.fit, result.unit),
                "markdown": {
                    "comparison": compare.variants_markdown(variants) if len(variants) > 1 else None,
                    "diff": compare.diff_markdown(before, result) if before else None,
                },
            }
        )

    return build


def register(server: LensServer) -> None:
    @server.feature(REQUEST)
    async def on_run_data(ls: LensServer, params: Any) -> dict:
        build = run_data(ls, params)
        return await asyncio.get_running_loop().run_in_executor(None, build)

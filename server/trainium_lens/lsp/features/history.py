"""``trainiumLens/history``: a function's stored runs, newest first, for the
client's "Compare with Baseline" picker (it then asks ``trainiumLens/runData``
with ``baseline`` set to the run picked).

Request ``{uri, function?}`` → ``{file, function, runs: [{run_id, created_at,
commit, dirty, branch, backend, host, clock, step_us}]}``; without
``function``, the most recently profiled function of the file; ``runs`` empty
when there is none.
"""

from __future__ import annotations

from typing import Any

from trainium_lens.lsp.state import LensServer, param
from trainium_lens.model import figures

REQUEST = "trainiumLens/history"


def history(ls: LensServer, params: Any) -> dict:
    uri, function = param(params, "uri"), param(params, "function")
    runs = ls.document_runs(uri) if isinstance(uri, str) else None
    if runs is None:
        return {"file": None, "function": None, "runs": []}
    runs.index.refresh()
    histories = runs.index.functions(runs.file)
    if not function and histories:
        function = max(histories, key=lambda fn: (histories[fn][-1].created_at, histories[fn][-1].run_id))
    found = histories.get(function, []) if function else []
    return {
        "file": runs.file,
        "function": function,
        "runs": [
            {
                "run_id": r.run_id,
                "created_at": r.created_at,
                "commit": r.git.commit,
                "dirty": r.git.dirty,
                "branch": r.git.branch,
                "backend": r.backend,
                "host": r.host,
                "clock": r.clock,
                "step_us": r.totals.self_time_us,
                "shown": {"step_us": figures.time_us(r.totals.self_time_us)},
            }
            for r in reversed(found)
        ],
    }


def register(server: LensServer) -> None:
    @server.feature(REQUEST)
    def on_history(ls: LensServer, params: Any) -> dict:
        return history(ls, params)

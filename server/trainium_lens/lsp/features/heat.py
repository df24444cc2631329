"""Line heat: ``trainiumLens/heat`` (LSP has no decoration API).

``{uri, version, lines: [{line, intensity, stale, unreliable}]}``, line 0-based,
intensity 0..1 relative to the hottest line of the document, ``unreliable``: the
line's run was judged noisy (the client tints it apart), sent whenever the
document's annotations may have changed (open, edit, new run, settings).
"""

from __future__ import annotations

from trainium_lens.lsp.present.trust import unreliable
from trainium_lens.lsp.state import LensServer

NOTIFICATION = "trainiumLens/heat"


def payload(ls: LensServer, uri: str) -> dict:
    annotations = ls.annotations(uri)
    _, version = ls.doc_lines(uri)
    threshold = ls.settings.hint_threshold  # no heat where there is no hint
    shown = (
        []
        if annotations is None
        else [a for a in annotations.lines if threshold.passes(a.time_us, a.result.totals.self_time_us)]
    )
    hottest = max((a.time_us for a in shown), default=0.0)
    return {
        "uri": uri,
        "version": version,
        "lines": [
            {
                "line": a.line,
                "intensity": round(a.time_us / hottest, 4) if hottest else 0.0,
                "stale": a.stale,
                "unreliable": unreliable(a.result),
            }
            for a in shown
        ],
    }


def publish(ls: LensServer, uri: str) -> None:
    ls.protocol.notify(NOTIFICATION, payload(ls, uri))


def register(server: LensServer) -> None:
    server.on_view_change.append(publish)

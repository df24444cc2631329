"""The language server's wiring: every feature registered from this one place.

Each feature lives in its own module under ``features/`` (settings parse in
``settings.py``, applied by ``features/configuration.py``) with a
``register(server)`` function that adds its handlers to
the shared ``LensServer`` (``state.py``). A new feature is one import and one
entry in ``FEATURES``. Order matters only for ``on_view_change`` listeners
(called in this order).
"""

from __future__ import annotations

import logging

from lsprotocol import types

from trainium_lens.lsp.features import (
    codelens,
    compare,
    configuration,
    diagnostics,
    documents,
    explorer,
    fixes,
    heat,
    history,
    hover,
    inlay_hints,
    panel,
    profile,
    script,
    timeline,
    warm,
)
from trainium_lens.lsp.state import LensServer

log = logging.getLogger(__name__)

FEATURES = (
    configuration,
    documents,
    profile,
    script,
    codelens,
    inlay_hints,
    hover,
    diagnostics,
    fixes,
    heat,
    compare,
    history,
    panel,
    timeline,
    explorer,
    warm,
)


def create_server() -> LensServer:
    server = LensServer()

    @server.feature(types.SHUTDOWN)
    def on_shutdown(ls: LensServer, *args: object) -> None:
        for callback in ls.on_shutdown:
            try:
                callback(ls)
            except Exception:
                log.exception("shutdown callback failed")
        ls.close_target()

    for feature in FEATURES:
        feature.register(server)
    return server


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="trainium-lens lsp: %(message)s")
    create_server().start_io()

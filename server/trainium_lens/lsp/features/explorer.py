"""``trainiumLens.openExplorer``: open the run behind a line in Neuron Explorer.

Arguments ``[{uri, line}]`` (line 0-based, where it sits in the editor now;
the client fills them from the cursor when the palette runs the command). The
work (``explorer.ExplorerService.open``: start Explorer on the host, ingest,
tunnel) runs in a worker thread; the URL then opens in the user's browser with
``window/showDocument`` (external). The service lives as long as the server:
its tunnels close with it (explicitly at exit, and by construction if the
server dies, see ``explorer.Tunnel``).
"""

from __future__ import annotations

import asyncio
import atexit
import logging
from typing import Any

from lsprotocol import types

from trainium_lens.errors import LensError
from trainium_lens.hosttools.explorer.service import ExplorerService, describe
from trainium_lens.hosttools.explorer.settings import ExplorerSettings
from trainium_lens.lsp import command_ids, workspace_trust
from trainium_lens.lsp.runs import pick_run

# A runtime import: pygls reads command handlers' annotations (get_type_hints).
from trainium_lens.lsp.state import LensServer

log = logging.getLogger(__name__)

COMMAND = command_ids.OPEN_EXPLORER


def explorer_settings(ls: LensServer) -> ExplorerSettings:
    """The server's ``trainiumLens.explorer.*`` settings, with the SSH config."""
    base = getattr(ls.settings, "explorer", None) or ExplorerSettings()
    from dataclasses import replace

    return replace(base, ssh_config=ls.settings.ssh_config)


class ExplorerFeature:
    def __init__(self) -> None:
        self.service: ExplorerService | None = None
        atexit.register(self.close)

    def service_for(self, settings: ExplorerSettings) -> ExplorerService:
        if self.service is None or self.service.settings != settings:
            self.close()  # new ports or host options: the old tunnels are wrong now
            self.service = ExplorerService(settings)
        return self.service

    def close(self) -> None:
        service, self.service = self.service, None
        if service is not None:
            service.close()

    async def open(self, ls: LensServer, args: Any) -> dict:
        arg = args[0] if isinstance(args, (list, tuple)) and len(args) == 1 else args
        uri = arg.get("uri") if isinstance(arg, dict) else None
        line = arg.get("line") if isinstance(arg, dict) else None
        if not isinstance(uri, str) or (line is not None and not isinstance(line, int)):
            raise LensError(f"{COMMAND} takes one argument {{uri, line}} (line 0-based)")
        runs = ls.document_runs(uri)
        if runs is None:
            raise LensError("not a file in a workspace")
        runs.index.refresh()
        result, _file, run_line = pick_run(ls.annotations(uri), ls.document_runs(uri), line)
        service = self.service_for(explorer_settings(ls))
        ls.log_line(f"Neuron Explorer: opening run {result.run_id} on {result.artifacts.location}")
        opened = await asyncio.get_running_loop().run_in_executor(None, service.open, result, run_line)
        ls.log_line(f"Neuron Explorer: {describe(opened)}: {opened.url}")
        shown = await ls.window_show_document_async(types.ShowDocumentParams(uri=opened.url, external=True))
        return {
            "url": opened.url,
            "profile": opened.profile,
            "tunnel": opened.tunnel,
            "server": opened.server,
            "ingested": opened.ingested,
            "window_ns": list(opened.window_ns) if opened.window_ns else None,
            "shown": bool(shown and shown.success),
        }


def register(server: LensServer) -> None:
    feature = ExplorerFeature()
    server.explorer = feature  # for the tests and a clean shutdown

    @server.command(COMMAND)
    async def open_explorer(ls: LensServer, *args: Any) -> dict:
        if workspace_trust.refused(ls):  # no host program, no tunnel
            return workspace_trust.refusal(workspace_trust.EXPLORER_REFUSED)
        try:
            return await feature.open(ls, args[0] if len(args) == 1 else list(args))
        except LensError as err:
            ls.show(f"Trainium Lens: {err}", types.MessageType.Error)
            return {"error": str(err)}

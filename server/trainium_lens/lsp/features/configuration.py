"""initializationOptions and workspace/didChangeConfiguration: the client's raw
``trainiumLens`` section parsed by ``lsp/settings.py``, its warnings shown."""

from __future__ import annotations

from typing import Any

from trainium_lens.lsp.settings import SECTION, parse, section_of
from trainium_lens.lsp.state import LensServer


def register(server: LensServer) -> None:
    from lsprotocol import types

    pending: list[str] = []

    def apply(payload: Any) -> list[str]:
        settings, warnings = parse(payload)
        changed = settings != server.settings
        server.settings = settings
        if changed:
            server.settings_changed()
        return warnings

    @server.feature(types.INITIALIZE)
    def on_initialize(ls: LensServer, params: types.InitializeParams) -> None:
        pending.extend(apply(params.initialization_options))

    @server.feature(types.INITIALIZED)
    def on_initialized(ls: LensServer, params: types.InitializedParams) -> None:
        for warning in pending:
            ls.show(warning, types.MessageType.Warning)
        pending.clear()

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def on_change(ls: LensServer, params: types.DidChangeConfigurationParams) -> None:
        payload = params.settings
        if section_of(payload) is None:
            # Pull model: the notification only says "something changed".
            caps = ls.client_capabilities.workspace
            if not (caps and caps.configuration):
                return
            items = await ls.workspace_configuration_async(
                types.ConfigurationParams(items=[types.ConfigurationItem(section=SECTION)])
            )
            payload = {SECTION: items[0] if items and isinstance(items[0], dict) else {}}
        for warning in apply(payload):
            ls.show(warning, types.MessageType.Warning)

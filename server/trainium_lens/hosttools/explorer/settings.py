"""Neuron Explorer's settings: what the client sends under ``trainiumLens.explorer``,
parsed (lsp/settings.py's table names the keys), and the URL they make."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from trainium_lens.errors import UsageError

DEFAULT_URL_TEMPLATE = "http://localhost:{port}/profile/{profile}"


@dataclass
class ExplorerSettings:
    ui_port: int = 3001  # on the host (neuron-explorer has no flag to change it)
    api_port: int = 3002
    local_ui_port: int = 3001  # this machine's end of the tunnel
    local_api_port: int = 3002  # the UI calls the API here: keep it equal to api_port
    url_template: str = DEFAULT_URL_TEMPLATE
    binary: str = ""  # path on the host; "" = PATH, then /opt/aws/neuron/bin
    ssh_config: str | None = None
    start_timeout_s: float = 60.0
    ingest_timeout_s: float = 3600.0  # large NTFFs take many minutes to process

    def __str__(self) -> str:  # how a settings warning shows the default
        return (
            f"UI port {self.ui_port}, API port {self.api_port} on the host, "
            f"{self.local_ui_port}/{self.local_api_port} here"
        )


_SETTING_FIELDS = {
    "uiPort": "ui_port",
    "apiPort": "api_port",
    "localUiPort": "local_ui_port",
    "localApiPort": "local_api_port",
    "urlTemplate": "url_template",
    "path": "binary",
}


SETTING_KEYS = tuple(_SETTING_FIELDS)  # trainiumLens.explorer.<key> (lsp/settings.py's table)


def settings_from(value: Any) -> ExplorerSettings:
    """``trainiumLens.explorer`` ({uiPort, apiPort, localUiPort, localApiPort,
    urlTemplate, path}) → settings; ValueError names what is wrong."""
    if value is None:
        return ExplorerSettings()
    if not isinstance(value, dict):
        raise ValueError(
            "expected an object with uiPort, apiPort, localUiPort, localApiPort, urlTemplate, path"
        )
    out = {}
    for key, raw in value.items():
        if key not in _SETTING_FIELDS:
            raise ValueError(f"unknown key {key!r}")
        if raw is None or raw == "":
            continue
        name = _SETTING_FIELDS[key]
        if key.endswith("Port"):
            if isinstance(raw, bool) or not isinstance(raw, int) or not 1 <= raw <= 65535:
                raise ValueError(f"{key} must be a port number (1-65535)")
        elif not isinstance(raw, str):
            raise ValueError(f"{key} must be a string")
        if key == "urlTemplate":
            if "{profile}" not in raw:
                raise ValueError("urlTemplate must contain {profile}")
            try:
                profile_url(raw, 1, "p", (1, 2))
            except UsageError as err:
                raise ValueError(str(err)) from None
        out[name] = raw
    return ExplorerSettings(**out)


def profile_url(template: str, port: int, profile: str, window: tuple[int, int] | None) -> str:
    """Fill the URL template; query parameters left empty (no window) are dropped."""
    start, end = (str(window[0]), str(window[1])) if window else ("", "")
    try:
        url = template.format(port=port, profile=quote(profile, safe=""), start_ns=start, end_ns=end)
    except (KeyError, IndexError, ValueError) as exc:
        raise UsageError(
            f"bad Explorer URL template {template!r}: use {{port}}, {{profile}}, "
            f"{{start_ns}}, {{end_ns}} ({exc})"
        ) from None
    if not window and "?" in url:
        base, _, query = url.partition("?")
        kept = [p for p in query.split("&") if p and not p.endswith("=")]
        url = base + ("?" + "&".join(kept) if kept else "")
    return url

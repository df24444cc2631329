"""Start the real language server as a subprocess and drive it (pytest-lsp).

Shared by tests/integration/lsp/, tests/ssh/test_lsp.py and bench/lsp_bench.py. Also builds synthetic
results for the tests that check rendering without running torch: they are
written through the real ``RunStore``, exactly as a profile run leaves them.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.protocol import JsonRPCNotification, JsonRPCResponseMessage, default_converter
from pytest_lsp import ClientServerConfig, LanguageClient
from pytest_lsp.client import register_lsp_features

from trainium_lens.model.lines import LineOp, LineStat
from trainium_lens.model.result import Finding, FunctionRef, LineWindows, Result, Totals, Window

SERVER = [sys.executable, "-m", "trainium_lens.lsp"]

CAPABILITIES = types.ClientCapabilities(
    window=types.WindowClientCapabilities(work_done_progress=True),
    workspace=types.WorkspaceClientCapabilities(
        configuration=True,
        inlay_hint=types.InlayHintWorkspaceClientCapabilities(refresh_support=True),
        code_lens=types.CodeLensWorkspaceClientCapabilities(refresh_support=True),
    ),
    text_document=types.TextDocumentClientCapabilities(
        hover=types.HoverClientCapabilities(content_format=[types.MarkupKind.Markdown]),
        inlay_hint=types.InlayHintClientCapabilities(),
    ),
)


class LensClient(LanguageClient):
    """pytest-lsp's client, keeping what our server sends besides LSP's own."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.heat: list[Any] = []  # trainiumLens/heat payloads, oldest first
        self.run_states: list[Any] = []  # trainiumLens/runState payloads
        self.worker: list[Any] = []  # trainiumLens/worker payloads (the warm worker), oldest first
        self.refreshes = 0  # workspace/inlayHint/refresh requests
        self.lens_stopped = False

    @property
    def progress_values(self) -> dict[Any, list[Any]]:
        """``progress_reports`` as sent: WorkDoneProgressBegin/Report/End values
        (pytest-lsp types them as the ProgressParams that carried them)."""
        return self.progress_reports


def _converter() -> Any:
    """pygls's converter, but the results of custom requests and the params of custom
    notifications stay the JSON they arrived as: pygls's own hook makes a namedtuple
    class for every object in them (a 6,000-line panel's reply: ~45 s of CPU in the
    test's process, more than the server spent building it)."""
    converter = default_converter()
    for message in (JsonRPCResponseMessage, JsonRPCNotification):
        converter.register_structure_hook(message, lambda obj, cls: cls(**obj))
    return converter


def _lens_client() -> LensClient:
    client = LensClient(converter_factory=_converter)
    register_lsp_features(client)  # what pytest-lsp's own factory adds
    return client


async def start(
    workspace: Path, options: dict | None = None, env: dict | None = None, command: list[str] | None = None
) -> LensClient:
    """A client connected to a fresh server, initialized on ``workspace``."""
    server_env = dict(os.environ)
    server_env.update(env or {})
    client = await ClientServerConfig(
        server_command=command or SERVER, server_env=server_env, client_factory=_lens_client
    ).start()
    assert isinstance(client, LensClient)

    @client.feature("trainiumLens/heat")
    def on_heat(params: Any) -> None:
        client.heat.append(_plain(params))

    @client.feature("trainiumLens/runState")
    def on_state(params: Any) -> None:
        client.run_states.append(_plain(params))

    @client.feature("trainiumLens/worker")
    def on_worker(params: Any) -> None:
        client.worker.append(_plain(params))

    @client.feature(types.WORKSPACE_INLAY_HINT_REFRESH)
    def on_hint_refresh(params: Any) -> None:
        client.refreshes += 1

    @client.feature(types.WORKSPACE_CODE_LENS_REFRESH)
    def on_lens_refresh(params: Any) -> None:
        return None

    await client.initialize_session(
        types.InitializeParams(
            capabilities=CAPABILITIES,
            root_uri=workspace.as_uri(),
            workspace_folders=[types.WorkspaceFolder(uri=workspace.as_uri(), name="ws")],
            initialization_options=options,
        )
    )
    return client


async def stop(client: LensClient) -> None:
    """Shut the server down cleanly (once; a test may have stopped it already)."""
    if client.lens_stopped:
        return
    client.lens_stopped = True
    await client.shutdown_session()
    await client.stop()


async def request(client: LanguageClient, method: str, params: dict) -> Any:
    """A custom request, with the reply as plain JSON data."""
    return _plain(await client.protocol.send_request_async(method, params))


def _plain(params: Any) -> Any:
    """Custom notifications and replies as plain data (objects of other kinds too)."""
    if isinstance(params, (str, int, float, bool)) or params is None:
        return params
    if hasattr(params, "_asdict"):  # pygls turns custom params into namedtuples
        return _plain(params._asdict())
    if isinstance(params, (list, tuple)):
        return [_plain(p) for p in params]
    if isinstance(params, dict):
        return {k: _plain(v) for k, v in params.items()}
    return {k: _plain(v) for k, v in vars(params).items()}


def open_doc(client: LanguageClient, path: Path, version: int = 1) -> str:
    uri = path.as_uri()
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(
                uri=uri, language_id="python", version=version, text=path.read_text()
            )
        )
    )
    return uri


def change(
    client: LanguageClient, uri: str, version: int, start: tuple[int, int], end: tuple[int, int], text: str
) -> None:
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[
                types.TextDocumentContentChangePartial(
                    range=types.Range(
                        start=types.Position(line=start[0], character=start[1]),
                        end=types.Position(line=end[0], character=end[1]),
                    ),
                    text=text,
                )
            ],
        )
    )


async def hints(client: LanguageClient, uri: str, last_line: int = 100_000) -> dict[int, str]:
    result = await client.text_document_inlay_hint_async(
        types.InlayHintParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=types.Range(
                start=types.Position(line=0, character=0), end=types.Position(line=last_line, character=0)
            ),
        )
    )
    return {
        h.position.line: h.label if isinstance(h.label, str) else "".join(p.value for p in h.label)
        for h in result or []
    }


async def hover(client: LanguageClient, uri: str, line: int) -> str | None:
    result = await client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=types.Position(line=line, character=4),
        )
    )
    if result is None:
        return None
    assert isinstance(result.contents, types.MarkupContent)
    return result.contents.value


async def lenses(client: LanguageClient, uri: str) -> list[types.CodeLens]:
    return list(
        await client.text_document_code_lens_async(
            types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri))
        )
        or []
    )


async def until(condition: Callable[[], Any], what: str, timeout: float = 60.0) -> None:
    """Wait for what the server does on its own, with no reply to await (a message,
    diagnostics, heat, a worker state; the effect of a notification we sent): until
    ``condition()`` holds (a plain or an async function). ``timeout`` only ends a
    hang, with ``what`` in the failure; it times nothing."""
    deadline = time.monotonic() + timeout
    while True:
        held = condition()
        if inspect.isawaitable(held):
            held = await held
        if held:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}")
        await asyncio.sleep(0.02)


# -- synthetic results --------------------------------------------------------


def make_result(
    file: str,
    function: str,
    def_line: int,
    lines: dict[int, tuple[str, float, list]],
    *,
    run_id: str = "20261129-101500-aaaa-0",
    created_at: str = "2026-11-29T10:15:00Z",
    clock: str = "cpu",
    findings: list[Finding] | None = None,
) -> Result:
    """``lines``: line -> (text, self_us, [(op, calls, self_us), ...])."""
    stats = []
    for line, (text, self_us, ops) in lines.items():
        calls = float(sum(c for _, c, _ in ops))
        stats.append(
            LineStat(
                file=file,
                line=line,
                self_time_us=self_us,
                total_time_us=self_us,
                self_cpu_us=self_us,
                calls=calls,
                self_time_us_min=self_us * 0.9,
                self_time_us_max=self_us * 1.2,
                self_time_us_median=self_us,
                text=text,
                function=function,
                ops=[LineOp(n, c, t, t) for n, c, t in ops],
            )
        )
    total = sum(s.self_time_us for s in stats)
    return Result(
        run_id=run_id,
        created_at=created_at,
        backend=clock,
        clock=clock,
        host="local",
        function=FunctionRef(file=file, name=function, line=def_line, marker_line=def_line - 1),
        totals=Totals(
            self_time_us=total,
            self_cpu_us=total,
            wall_us_median=total * 1.1,
            steps=5,
            dispatches=float(sum(s.calls for s in stats)),
        ),
        lines=sorted(stats, key=lambda s: -s.self_time_us),
        findings=findings or [],
        timeline=[LineWindows(file=file, line=s.line, windows=[Window(1000.0 + s.line, 5.0)]) for s in stats],
    )

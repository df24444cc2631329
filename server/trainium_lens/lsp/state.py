"""The language server's shared state: ``LensServer``.

State that several features read (settings, stored runs, where each document's
profiled lines sit now, the target) lives here; features (``features/``) add
their handlers in ``register(server)`` and draw from it; features that redraw
when it changes (diagnostics, heat) subscribe to ``on_view_change``. This module
imports no feature: ``server.py`` wires them.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import unquote, urlparse

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import from_fs_path, to_fs_path

from trainium_lens import __version__
from trainium_lens.harness.markers import source_lines
from trainium_lens.lsp import library_files
from trainium_lens.lsp.protocol import LensProtocol
from trainium_lens.lsp.runs import Annotations, DocumentRuns, RunIndex
from trainium_lens.lsp.settings import Settings
from trainium_lens.model.cells import cell_file
from trainium_lens.model.codec import visible

if TYPE_CHECKING:
    from trainium_lens.targets.base import Target
    from trainium_lens.targets.where import Where

log = logging.getLogger(__name__)


ViewListener = Callable[["LensServer", str], None]


def param(params: Any, name: str) -> Any:
    """A field of a custom request's params: pygls hands them over as an object, a
    plain client (or a test) as a dict."""
    return params.get(name) if isinstance(params, dict) else getattr(params, name, None)


class Closeable(Protocol):
    """What the server keeps of a feature's service: it is closed at shutdown."""

    def close(self) -> None: ...


#: The scheme of a notebook cell's text document (VS Code's; LSP 3.17 notebook sync).
CELL_SCHEME = "vscode-notebook-cell"


class LensServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(
            "trainium-lens",
            __version__,
            protocol_cls=LensProtocol,
            text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
            # LSP 3.17: a notebook's Python cells arrive as text documents of their own
            # (``vscode-notebook-cell:`` URIs, cell-local positions; docs/notebooks.md)
            notebook_document_sync=types.NotebookDocumentSyncOptions(
                notebook_selector=[
                    types.NotebookDocumentFilterWithCells(
                        cells=[types.NotebookCellLanguage(language="python")], notebook="*"
                    )
                ]
            ),
        )
        self.settings = Settings()
        self.indexes: dict[Path, RunIndex] = {}
        self.documents: dict[str, DocumentRuns] = {}
        self.on_view_change: list[ViewListener] = []
        self.running: dict[str, Running] = {}  # file path -> the profile in flight
        # Called on ``shutdown`` (stop runs, close connections and tunnels).
        self.on_shutdown: list[Callable[[LensServer], None]] = []
        # Called with each target the server makes (e.g. to give it a warm worker).
        self.on_new_target: list[Callable[[LensServer, object], None]] = []
        # Called after new settings were applied.
        self.on_settings_change: list[Callable[[LensServer], None]] = []
        self._lines: dict[str, tuple[int | None, list[str]]] = {}
        self._pending: dict[str, asyncio.TimerHandle] = {}  # uri -> scheduled views_changed
        self._target: Target | None = None  # kept between runs: an SSH target keeps its connection
        self._target_key: Where | None = None
        self.explorer: Closeable | None = None  # lsp/features/explorer.py (tests, shutdown)

    def settings_changed(self) -> None:
        """New settings: hints may pass or fail the threshold, runs may go elsewhere."""
        if self._target is not None and self._target_key != self.settings.where():
            self.close_target()
        if any(i.history_size != self.settings.history_size for i in self.indexes.values()):
            self.indexes.clear()  # rebuilt on next use, bounded by the new size
            self.documents.clear()
        for runs in self.documents.values():
            runs.invalidate()
        if self.documents:
            self.views_changed(refresh=True)
        for callback in self.on_settings_change:
            try:
                callback(self)
            except Exception:
                log.exception("settings callback failed")

    def target(self) -> Target:
        """The target the settings name, reused while they stay the same."""
        if self.settings.rejected:  # never fall back to running somewhere else
            from trainium_lens.errors import TargetError

            raise TargetError(
                f"invalid setting {self.settings.rejected[0]}; fix it to profile (not running on "
                f"this machine instead)"
            )
        key = self.settings.where()
        if self._target is None or self._target_key != key:
            self.close_target()
            from trainium_lens.targets.make import make_target

            self._target = make_target(key)
            self._target_key = key
            for hook in self.on_new_target:
                try:
                    hook(self, self._target)
                except Exception:  # the target works without what a hook adds
                    log.exception("new-target hook failed")
        return self._target

    def close_target(self) -> None:
        target, self._target, self._target_key = self._target, None, None
        if target is not None:
            try:
                target.close()
            except Exception:
                log.exception("closing the target failed")

    # -- where files and runs live --------------------------------------------
    def workspace_for(self, path: Path) -> Path:
        """The workspace folder holding ``path`` (the deepest one), else the
        git work tree or folder ``jobs.workspace_root_for`` picks."""
        candidates = []
        try:
            folders = [f.uri for f in self.workspace.folders.values()]
            if self.workspace.root_uri:
                folders.append(self.workspace.root_uri)
        except RuntimeError:  # before initialize
            folders = []
        for uri in folders:
            root = Path(to_fs_path(uri) or "").resolve()
            if root != Path("/") and path.is_relative_to(root):
                candidates.append(root)
        if candidates:
            return max(candidates, key=lambda p: len(p.parts))
        from trainium_lens.model.job import workspace_root_for

        return workspace_root_for(path)

    def index_for(self, workspace: Path) -> RunIndex:
        index = self.indexes.get(workspace)
        if index is None or index.history_size != self.settings.history_size:
            index = self.indexes[workspace] = RunIndex(workspace, self.settings.history_size)
            index.on_skipped = lambda line: self.show(f"Trainium Lens: {line}", types.MessageType.Warning)
        return index

    def document_runs(self, uri: str) -> DocumentRuns | None:
        """Run state of a ``file:`` document or a notebook cell (created on first use)."""
        runs = self.documents.get(uri)
        if uri.startswith(CELL_SCHEME + ":"):
            return self._cell_runs(uri, runs)
        if runs is not None:
            return runs
        path_str = to_fs_path(uri) if uri.startswith("file:") else None
        if not path_str:
            return None
        path = Path(path_str).resolve()
        workspace = self.workspace_for(path)
        try:
            rel: str | None = path.relative_to(workspace).as_posix()
        except ValueError:
            rel = None
        # an included package's file? (a venv inside the workspace, or anywhere else:
        # ~/.venvs, conda, the system's site-packages)
        if rel is None or library_files.is_library_rel(rel) or library_files.is_library_path(path):
            found = self._library_document(path)
            if found is None:
                return None
            workspace, rel = found
        index = self.index_for(workspace)
        index.refresh()
        runs = self.documents[uri] = DocumentRuns(uri, rel, index)
        return runs

    def _cell_runs(self, uri: str, runs: DocumentRuns | None) -> DocumentRuns | None:
        """A cell's results are those of its text (``model/cells.py``): the name its text
        gives it now, or, once edited, the name its text gave it before, while no result
        knows the new text (its lines then read stale, as an edited file's do). Never a
        path from the cell's URI but the notebook's, for its workspace."""
        try:
            text = self.workspace.get_text_document(uri).source
        except Exception:  # noqa: BLE001 - a cell this server was never sent
            return runs
        file = cell_file(text)
        if runs is not None and (runs.file == file or not runs.index.current_touching(file)):
            return runs
        notebook = Path(unquote(urlparse(uri).path) or "/").resolve()
        index = runs.index if runs is not None else self.index_for(self.workspace_for(notebook))
        index.refresh()
        runs = self.documents[uri] = DocumentRuns(uri, file, index)
        runs.replace_all(self.doc_lines(uri)[0])
        return runs

    def document_opened(self, uri: str) -> None:
        """A document (or a notebook cell) opened: its stored runs placed on its lines."""
        runs = self.document_runs(uri)
        if runs is None:
            return
        if runs.index.refresh():  # runs added outside this server (the CLI, a kernel)
            for other in self.documents.values():
                other.invalidate()
        lines, _ = self.doc_lines(uri)
        runs.replace_all(lines)
        self.views_changed([uri])

    def document_changed(self, uri: str, changes: Sequence[types.TextDocumentContentChangeEvent]) -> None:
        """Edits: the annotations move with their lines."""
        runs = self.documents.get(uri)
        if runs is None:
            return
        for change in changes:
            if isinstance(change, types.TextDocumentContentChangePartial):
                r = change.range
                runs.apply_change(
                    (r.start.line, r.start.character), (r.end.line, r.end.character), change.text
                )
            else:
                runs.replace_all(self.doc_lines(uri)[0])
        self.views_changed_soon(uri)

    def document_closed(self, uri: str) -> None:
        self.documents.pop(uri, None)
        self._lines.pop(uri, None)

    def doc_lines(self, uri: str) -> tuple[list[str], int | None]:
        """The document's lines (no line ends), cached per version."""
        doc = self.workspace.get_text_document(uri)
        cached = self._lines.get(uri)
        if cached is not None and cached[0] == doc.version and doc.version is not None:
            return cached[1], doc.version
        lines = source_lines(doc.source)  # the tokenizer's lines, as the editor counts them
        self._lines[uri] = (doc.version, lines)
        return lines, doc.version

    def annotations(self, uri: str) -> Annotations | None:
        runs = self.document_runs(uri)
        if runs is None:
            return None
        runs.index.refresh()  # one stat(): picks up runs the CLI stored meanwhile
        lines, version = self.doc_lines(uri)
        return runs.annotations(lines, version)

    def _library_document(self, path: Path) -> tuple[Path, str] | None:
        """(workspace, module path) of an open file of an included package."""
        try:
            folders = [f.uri for f in self.workspace.folders.values()]
            if self.workspace.root_uri:
                folders.append(self.workspace.root_uri)
        except RuntimeError:
            folders = []
        roots = [Path(to_fs_path(uri) or "").resolve() for uri in folders] + list(self.indexes)
        for root in dict.fromkeys(roots):
            if root == Path("/") or not (root / ".trainium-lens").is_dir():
                continue
            rel = library_files.module_path_for(path, self.index_for(root))
            if rel is not None:
                return root, rel
        return None

    def uri_for(self, workspace: Path, file: str) -> str:
        path = workspace / file
        if not path.exists():  # an included package's file: where it is installed
            path = library_files.installed_path(file, self.index_for(workspace)) or path
        return from_fs_path(str(path)) or ""

    # -- telling the client ---------------------------------------------------
    def views_changed(self, uris: Sequence[str] | None = None, *, refresh: bool = False) -> None:
        """Annotations of ``uris`` (default: every open document) may differ now:
        push diagnostics and heat, and with ``refresh`` ask the client to re-pull
        inlay hints and code lenses."""
        for uri in list(uris if uris is not None else self.documents):
            if uri in self.documents:
                for listener in self.on_view_change:
                    try:
                        listener(self, uri)
                    except Exception:  # one broken view must not break the others
                        log.exception("view listener failed for %s", uri)
        if refresh:
            self.refresh_pulled_views()

    def views_changed_soon(self, uri: str, delay: float = 0.15) -> None:
        """``views_changed`` once typing pauses: pushing heat and diagnostics for
        thousands of lines on every keystroke would delay the next request."""
        pending = self._pending.pop(uri, None)
        if pending is not None:
            pending.cancel()

        def fire() -> None:
            self._pending.pop(uri, None)
            self.views_changed([uri])

        self._pending[uri] = asyncio.get_event_loop().call_later(delay, fire)

    def refresh_pulled_views(self) -> None:
        caps = self.client_capabilities.workspace
        if caps and caps.inlay_hint and caps.inlay_hint.refresh_support:
            self.workspace_inlay_hint_refresh(None)
        if caps and caps.code_lens and caps.code_lens.refresh_support:
            self.workspace_code_lens_refresh(None)

    # Messages carry words from the user's code and hosts (an exception's text, a
    # script's output): bidi and control characters go out escaped (model/codec).
    def show(self, message: str, kind: types.MessageType = types.MessageType.Info) -> None:
        self.window_show_message(types.ShowMessageParams(type=kind, message=visible(message)))

    def log_line(self, message: str, kind: types.MessageType = types.MessageType.Log) -> None:
        self.window_log_message(types.LogMessageParams(type=kind, message=visible(message)))


SCRIPT = "script"  # what ``Running.functions`` names while a script runs (the code lens reads it)


@dataclass
class Running:
    """A profile in flight: one per file (a second request is refused)."""

    file: str
    functions: list[str]
    cancel: threading.Event = field(default_factory=threading.Event)
    token: str | None = None

"""Document sync: run state follows the editor's text.

``didOpen`` loads the workspace's stored runs (so hints survive a restart),
``didChange`` moves annotations with their lines, ``didClose`` forgets them.
"""

from __future__ import annotations

from lsprotocol import types

from trainium_lens.lsp.state import LensServer


def register(server: LensServer) -> None:
    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: LensServer, params: types.DidOpenTextDocumentParams) -> None:
        uri = params.text_document.uri
        runs = ls.document_runs(uri)
        if runs is None:
            return
        if runs.index.refresh():  # runs added outside this server (the CLI)
            for other in ls.documents.values():
                other.invalidate()
        lines, _ = ls.doc_lines(uri)
        runs.replace_all(lines)
        ls.views_changed([uri])

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: LensServer, params: types.DidChangeTextDocumentParams) -> None:
        uri = params.text_document.uri
        runs = ls.documents.get(uri)
        if runs is None:
            return
        for change in params.content_changes:
            if isinstance(change, types.TextDocumentContentChangePartial):
                r = change.range
                runs.apply_change(
                    (r.start.line, r.start.character), (r.end.line, r.end.character), change.text
                )
            else:
                runs.replace_all(ls.doc_lines(uri)[0])
        ls.views_changed_soon(uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: LensServer, params: types.DidCloseTextDocumentParams) -> None:
        ls.documents.pop(params.text_document.uri, None)
        ls._lines.pop(params.text_document.uri, None)

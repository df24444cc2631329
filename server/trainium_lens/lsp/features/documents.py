"""Document sync: run state follows the editor's text, in files and in notebook cells.

``didOpen`` loads the workspace's stored runs (so hints survive a restart),
``didChange`` moves annotations with their lines, ``didClose`` forgets them
(``LensServer.document_opened`` and its two siblings, in ``lsp/state.py``).
"""

from __future__ import annotations

from lsprotocol import types

from trainium_lens.lsp.state import LensServer


def register(server: LensServer) -> None:
    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: LensServer, params: types.DidOpenTextDocumentParams) -> None:
        ls.document_opened(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: LensServer, params: types.DidChangeTextDocumentParams) -> None:
        ls.document_changed(params.text_document.uri, params.content_changes)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: LensServer, params: types.DidCloseTextDocumentParams) -> None:
        ls.document_closed(params.text_document.uri)

    # LSP 3.17 notebook sync: the cells are text documents, followed as files are
    @server.feature(types.NOTEBOOK_DOCUMENT_DID_OPEN)
    def notebook_open(ls: LensServer, params: types.DidOpenNotebookDocumentParams) -> None:
        for cell in params.cell_text_documents:
            ls.document_opened(cell.uri)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CHANGE)
    def notebook_change(ls: LensServer, params: types.DidChangeNotebookDocumentParams) -> None:
        cells = params.change.cells
        if cells is None:
            return
        structure = cells.structure
        for closed in (structure.did_close or []) if structure else []:
            ls.document_closed(closed.uri)
        for opened in (structure.did_open or []) if structure else []:
            ls.document_opened(opened.uri)
        for text in cells.text_content or []:
            ls.document_changed(text.document.uri, text.changes)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CLOSE)
    def notebook_close(ls: LensServer, params: types.DidCloseNotebookDocumentParams) -> None:
        for cell in params.cell_text_documents:
            ls.document_closed(cell.uri)

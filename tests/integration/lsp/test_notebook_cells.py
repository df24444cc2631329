"""Notebook cells over LSP 3.17 notebook sync (``notebookDocument/didOpen``,
``vscode-notebook-cell:`` URIs): a stored cell result's hints land on exactly the
cell lines it names, in the cells whose text gave its names, and an edited line
reads stale (docs/notebooks.md)."""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types

from tests.support.lsp_client import hints, make_result, start, stop
from trainium_lens.model.cells import cell_file
from trainium_lens.model.store import RunStore

MODEL = (
    "class Tiny(nn.Module):\n    def forward(self, x):\n        h = torch.relu(self.fc(x))\n"
    "        return self.out(h)"
)
OPT = "opt = torch.optim.SGD(model.parameters(), lr=0.01)"
STEP = "%%trainium_lens\nout = model(x)\nloss = out.sum()\nloss.backward()\nopt.step()"


def stored(ws: Path) -> None:
    """A kernel's result as the magic stores it: the step cell's lines and the model cell's."""
    step = make_result(
        cell_file(STEP),
        "cell",
        1,
        {
            3: ("loss = out.sum()", 12.0, [("aten::sum", 1, 12.0)]),
            5: ("opt.step()", 30.0, [("aten::add_", 4, 30.0)]),
        },
    )
    model = make_result(
        cell_file(MODEL), "cell", 1, {3: ("h = torch.relu(self.fc(x))", 40.0, [("aten::addmm", 1, 40.0)])}
    )
    step.lines += model.lines
    RunStore(ws).save(step)


def notebook(client: object, ws: Path, cells: list[str]) -> list[str]:
    nb_uri = (ws / "train.ipynb").as_uri()
    uris = [
        f"vscode-notebook-cell:{(ws / 'train.ipynb').as_posix()}#W{i}sZmlsZQ%3D%3D" for i in range(len(cells))
    ]
    client.notebook_document_did_open(  # type: ignore[attr-defined]
        types.DidOpenNotebookDocumentParams(
            notebook_document=types.NotebookDocument(
                uri=nb_uri,
                notebook_type="jupyter-notebook",
                version=1,
                cells=[types.NotebookCell(kind=types.NotebookCellKind.Code, document=u) for u in uris],
            ),
            cell_text_documents=[
                types.TextDocumentItem(uri=u, language_id="python", version=1, text=t)
                for u, t in zip(uris, cells, strict=True)
            ],
        )
    )
    return uris


async def test_hints_on_the_cells_lines_a_kernels_result_names(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    stored(ws)
    client = await start(ws)
    try:
        model, opt, step = notebook(client, ws, [MODEL, OPT, STEP])
        assert set(await hints(client, step)) == {2, 4}  # cell lines 3 and 5, 0-based
        assert set(await hints(client, model)) == {2}
        assert await hints(client, opt) == {}  # a cell that did not run
        assert "⏱" in (await hints(client, step))[4]
        # the step cell's "opt.step()" line edited: its hint reads stale, the others stay
        client.notebook_document_did_change(
            types.DidChangeNotebookDocumentParams(
                notebook_document=types.VersionedNotebookDocumentIdentifier(
                    version=2, uri=(ws / "train.ipynb").as_uri()
                ),
                change=types.NotebookDocumentChangeEvent(
                    cells=types.NotebookDocumentCellChanges(
                        text_content=[
                            types.NotebookDocumentCellContentChanges(
                                document=types.VersionedTextDocumentIdentifier(uri=step, version=2),
                                changes=[
                                    types.TextDocumentContentChangePartial(
                                        range=types.Range(
                                            start=types.Position(line=4, character=10),
                                            end=types.Position(line=4, character=10),
                                        ),
                                        text="  # lr warm-up",
                                    )
                                ],
                            )
                        ]
                    )
                ),
            )
        )
        after = await hints(client, step)
        assert set(after) == {2, 4} and "(stale)" in after[4] and "(stale)" not in after[2]
    finally:
        await stop(client)


async def test_a_cell_whose_text_no_result_knows_gets_nothing(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    stored(ws)
    client = await start(ws)
    try:
        [step] = notebook(client, ws, [STEP.replace("out.sum()", "out.mean()")])
        assert await hints(client, step) == {}
    finally:
        await stop(client)

"""Hover, heat and code lens in notebook cells (LSP 3.17 notebook sync), from results a
real ipykernel stored with ``%%trainium_lens`` (nbclient): a one-step cell and a cell
that loops over its own steps, the model's lines in their own cell (docs/notebooks.md,
"In the editor")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types

from tests.integration.lsp.test_notebook_cells import notebook
from tests.integration.notebook.kernel import execute, result_for
from tests.integration.notebook.test_loop_cell import LOOP
from tests.integration.notebook.test_magic import MODEL, OPTIMIZER, STEP
from tests.support.lsp_client import hints, hover, lenses, start, stop, until
from trainium_lens.lsp import command_ids

CELLS = ["%load_ext trainium_lens", MODEL, OPTIMIZER, STEP, LOOP]


@pytest.fixture(scope="module")
def kernel_stored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder a kernel stored the step cell's and the loop cell's results in."""
    nb, work = execute(tmp_path_factory.mktemp("views"), CELLS)
    assert not [o for c in nb.cells for o in c.outputs if o.output_type == "error"]
    return work


@pytest.fixture
async def opened(kernel_stored: Path) -> Any:
    client = await start(kernel_stored)
    try:
        cells = notebook(client, kernel_stored, CELLS)
        yield client, dict(zip(["load", "model", "opt", "step", "loop"], cells, strict=True))
    finally:
        await stop(client)


async def test_hover_on_a_cell_line_shows_the_ops_behind_it(opened: Any, kernel_stored: Path) -> None:
    client, uri = opened
    result = result_for(kernel_stored, STEP)
    backward = next(s for s in result.lines if s.text == "loss.backward()")
    shown = await hover(client, uri["step"], backward.line - 1)
    assert shown is not None and f"line {backward.line} of `cell`" in shown, shown
    for op in backward.ops[:3]:  # the stored line's own ops, by name
        assert op.name.replace("_", "\\_") in shown or op.name in shown, (op.name, shown)
    # the model's forward, in its own cell, hovered there: its ops (the Linear's matmul)
    forward = await hover(client, uri["model"], 11)
    assert forward is not None and "addmm" in forward, forward
    # the loop cell's optimizer line: the optimizer's ops, per step
    stepped = await hover(client, uri["loop"], 6)
    assert stepped is not None and "per step" in stepped and "add" in stepped, stepped
    assert await hover(client, uri["opt"], 0) is None  # a cell that did not run


async def test_heat_in_the_cells_that_ran_and_none_elsewhere(opened: Any) -> None:
    client, uri = opened
    for name in ("step", "loop", "model"):

        def sent(cell: str = uri[name]) -> bool:
            return any(h["uri"] == cell and h["lines"] for h in client.heat)

        await until(sent, f"heat: {name}")
    for name in ("step", "loop", "model"):
        heat = [h for h in client.heat if h["uri"] == uri[name]][-1]["lines"]
        hinted = set(await hints(client, uri[name]))
        assert {h["line"] for h in heat} == hinted, (name, heat, hinted)  # heat where the hints are
        assert max(h["intensity"] for h in heat) == 1.0 and all(0 <= h["intensity"] <= 1 for h in heat)
    assert all(not h["lines"] for h in client.heat if h["uri"] == uri["opt"])


async def test_a_cells_own_runs_get_their_lenses_on_the_magics_line(opened: Any, kernel_stored: Path) -> None:
    client, uri = opened
    for name, source in (("step", STEP), ("loop", LOOP)):
        result = result_for(kernel_stored, source)
        found = await lenses(client, uri[name])
        shows = [lens for lens in found if lens.command and lens.command.command == command_ids.SHOW_RESULTS]
        assert len(shows) == 1, found
        assert shows[0].range.start.line == 0  # the %%trainium_lens line
        assert list(shows[0].command.arguments or []) == [
            {"uri": uri[name], "function": result.function.name}
        ]
        assert result.clock in shows[0].command.title, shows[0].command.title
        timeline = [
            lens for lens in found if lens.command and lens.command.command == command_ids.OPEN_TIMELINE
        ]
        assert len(timeline) == 1, found
        assert not [lens for lens in found if lens.command.command == command_ids.PROFILE_CELL]
    # the model cell's lines ran under another cell's run; the optimizer cell never ran:
    # neither has runs of its own, so neither has their lenses (only Profile Cell's)
    for name in ("model", "opt"):
        assert [lens.command.command for lens in await lenses(client, uri[name])] == [
            command_ids.PROFILE_CELL
        ]


async def test_profile_cell_on_each_code_cell_without_the_magic(opened: Any, kernel_stored: Path) -> None:
    """The lens on the first line of the cells with code and no ``%%`` magic, naming the
    cell; none on ``%load_ext`` (nothing to profile) nor on the magic's cells."""
    client, uri = opened
    offered = {}
    for name, cell in uri.items():
        found = [
            lens for lens in await lenses(client, cell) if lens.command.command == command_ids.PROFILE_CELL
        ]
        if found:
            [lens] = found
            assert lens.range.start.line == 0 and lens.command.title == "▶ Profile Cell", lens
            assert list(lens.command.arguments or []) == [{"uri": cell}]
            offered[name] = lens
    assert set(offered) == {"model", "opt"}, offered
    # what the lens's command does first: the magic on the cell's first line; the lens goes
    client.notebook_document_did_change(
        types.DidChangeNotebookDocumentParams(
            notebook_document=types.VersionedNotebookDocumentIdentifier(
                version=2, uri=(kernel_stored / "train.ipynb").as_uri()
            ),
            change=types.NotebookDocumentChangeEvent(
                cells=types.NotebookDocumentCellChanges(
                    text_content=[
                        types.NotebookDocumentCellContentChanges(
                            document=types.VersionedTextDocumentIdentifier(uri=uri["opt"], version=2),
                            changes=[
                                types.TextDocumentContentChangePartial(
                                    range=types.Range(start=types.Position(0, 0), end=types.Position(0, 0)),
                                    text="%%trainium_lens\n",
                                )
                            ],
                        )
                    ]
                )
            ),
        )
    )
    assert [lens.command.command for lens in await lenses(client, uri["opt"])] == []

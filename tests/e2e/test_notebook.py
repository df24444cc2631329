"""A notebook in a real VS Code: code-server's own notebook editor (its built-in
ipynb serializer; no Jupyter extension, no kernel in the browser) opens a .ipynb
whose ``%%trainium_lens`` cell a real ipykernel ran (nbclient) and whose result the
kernel stored in the workspace. ``notebook_driver.mjs`` reads what the cells show:
the inlay hints on the lines that ran (the loop cell's and the model cell's), the
heat, the code lens on the magic's line, and the hover's ops on the model's forward
line; a screenshot goes to test-results/e2e/notebook.png (docs/notebooks.md). Then it
clicks *Profile Cell* on the optimizer's cell (no magic) and reads what that did."""

from __future__ import annotations

import json
import shutil
import sys

import nbformat
import pytest

from tests.integration.notebook.kernel import cell_rel, execute, result_for
from tests.integration.notebook.test_loop_cell import LOOP
from tests.integration.notebook.test_magic import MODEL, OPTIMIZER

from . import test_vscode
from .test_vscode import DOC_IMAGES, RESULTS, drive, installed_server, prepare

pytestmark = test_vscode.pytestmark  # the e2e marker; skipped without code-server

#: this session's screenshot, the one docs/notebooks.md shows (as test_vscode's DOC_SHOTS)
DOC_SHOT = ("notebook.png", "notebook-cells.png")
# the magic's cell last: its output (the table) is tall, and the cells above it stay in view
CELLS = ["%load_ext trainium_lens", MODEL, OPTIMIZER, LOOP]
NOTEBOOK = "train.ipynb"


@pytest.fixture(scope="module")
def notebook_session(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("vscode-notebook")
    workspace, _settings = prepare(tmp)
    settings = workspace / ".vscode" / "settings.json"
    settings.write_text(
        json.dumps({**json.loads(settings.read_text()), "trainiumLens.python": sys.executable})
    )
    nb, _ = execute(tmp / "kernel", CELLS, {"OMP_NUM_THREADS": "1"}, work=workspace)
    assert not [o for c in nb.cells for o in c.outputs if o.output_type == "error"]
    nbformat.write(nb, workspace / NOTEBOOK)
    result = result_for(workspace, LOOP)
    # the user's settings prepare() wrote, and .ipynb files in VS Code's notebook editor
    # (code-server's built-in ipynb serializer; without the association it opened as JSON)
    user = json.loads((tmp / "user-data" / "User" / "settings.json").read_text())
    user["workbench.editorAssociations"] = {"*.ipynb": "jupyter-notebook"}

    def start(home):
        (home / "user-data" / "User").mkdir(parents=True)
        (home / "user-data" / "User" / "settings.json").write_text(json.dumps(user))
        return installed_server(home, workspace)[0], {
            "notebook": NOTEBOOK,
            "hoverText": "h = torch.relu(self.fc(x))",
            "profileText": OPTIMIZER.splitlines()[0],
        }

    (RESULTS / DOC_SHOT[0]).unlink(missing_ok=True)  # an earlier run's is never published as this one's
    obs, _ = drive(
        tmp_path_factory, "vscode-notebook-server", "notebook_driver.mjs", "notebook-observed.json", start
    )
    DOC_IMAGES.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(RESULTS / DOC_SHOT[0], DOC_IMAGES / DOC_SHOT[1])
    return obs, result


def lines_of(obs: dict, source: str) -> dict:
    """What the driver read in the cell editor showing ``source``: by 0-based line."""
    first = source.splitlines()[0].strip()
    [cell] = [c for c in obs["cells"] if c["lines"] and c["lines"][0].strip() == first]
    return cell


def expected_lines(result, source: str) -> set[int]:
    """The 0-based cell lines the stored result gives a figure (what gets a hint)."""
    return {
        s.line - 1 for s in result.lines if s.file == cell_rel(source) and (s.self_time_us or s.total_time_us)
    }


def test_the_cells_show_the_kernels_hints_on_exactly_the_lines_that_ran(notebook_session):
    obs, result = notebook_session
    for source in (LOOP, MODEL):
        cell = lines_of(obs, source)
        hinted = {int(n) for n in cell["hints"]}
        assert hinted == expected_lines(result, source) and hinted, (source[:30], cell)
        assert all("⏱" in h for h in cell["hints"].values())
    assert not lines_of(obs, OPTIMIZER)["hints"]  # a cell that did not run


def test_heat_and_the_cells_lens_show(notebook_session):
    obs, result = notebook_session
    loop = lines_of(obs, LOOP)
    assert set(map(int, loop["heat"])) == {int(n) for n in loop["hints"]}, loop  # tinted where hinted
    assert any(result.clock in lens for lens in loop["lenses"]), loop["lenses"]  # the headline lens
    assert not lines_of(obs, OPTIMIZER)["heat"]


def test_the_hover_on_the_models_line_shows_its_ops(notebook_session):
    obs, _result = notebook_session
    assert "aten::" in obs["hover"] and "Trainium Lens" in obs["hover"], obs["hover"]
    assert (RESULTS / "notebook.png").stat().st_size > 10_000


def test_profile_cell_puts_the_magic_on_top_and_asks_vs_code_to_run_the_cell(notebook_session):
    """*Profile Cell* is offered on a code cell without the magic; clicking it puts
    ``%%trainium_lens`` on the cell's first line (the rest of the cell as it was) and
    inserts no ``%load_ext`` cell (the notebook's first cell loads it). The execution
    itself is not observable here: code-server has no Jupyter extension, so no kernel
    controller. What is observable is VS Code's answer to ``notebook.cell.execute`` with
    none selected: its kernel picker opens (with the Jupyter extension, the selected
    kernel runs the cell; tests/integration/notebook runs the magic in a real kernel)."""
    obs, _result = notebook_session
    done = obs["profileCell"]
    assert any("Profile Cell" in lens for lens in done["before"]["lenses"]), done["before"]
    assert not any("Profile Cell" in lens for lens in lines_of(obs, LOOP)["lenses"])  # has the magic
    assert done["after"]["lines"][0].strip() == "%%trainium_lens", done["after"]["lines"]
    assert [line.strip() for line in done["after"]["lines"][1:]] == [
        line.strip() for line in done["before"]["lines"]
    ][: len(done["after"]["lines"]) - 1]
    assert len(done["cellsAfter"]) == len(done["cellsBefore"]), done  # no load cell added
    assert done["kernelAsked"], done

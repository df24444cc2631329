"""``%%trainium_lens`` in a real Jupyter kernel: a notebook executed by nbclient as
Jupyter executes it (docs/notebooks.md). One kernel, one notebook, for every test
here: a tiny model, a few steps."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.integration.notebook.kernel import (
    cell_rel,
    errors_of,
    execute,
    html_of,
    line,
    result_for,
    text_of,
)
from trainium_lens.model.store import RunStore

# A notebook as a user writes one: the model in one cell, its optimizer in the next,
# one training step under the magic, then cells that use what the step left.
MODEL = """\
import torch
from torch import nn


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(32, 64)
        self.out = nn.Linear(64, 8)

    def forward(self, x):
        h = torch.relu(self.fc(x))
        return self.out(h)


torch.manual_seed(0)
model = Tiny()
x, y = torch.randn(16, 32), torch.randn(16, 8)"""
OPTIMIZER = "opt = torch.optim.SGD(model.parameters(), lr=0.01)"
STEP = """\
%%trainium_lens --steps 2:3 --json step.json
out = model(x)
loss = ((out - y) ** 2).mean()
opt.zero_grad()
loss.backward()
opt.step()"""
AFTER = 'print(f"after: loss={loss.item():.4f} out={tuple(out.shape)}")'
PREDICT = "def predict(batch):\n    return model(batch).softmax(-1)"
STATEMENT = "# one call, as %lprun would run it\n%trainium_lens predict(x)"
RAISES = """\
%%trainium_lens --steps 2:2
scaled = model(x) * 2
raise ValueError("the user's own error")"""
BAD_OPTION = "%%trainium_lens --stpes 2:3\nout = model(x)"
SYNTAX = "%%trainium_lens\nout = model(x)\nloss = (out - y"
OWN_PROFILER = "%%trainium_lens\nwith torch.profiler.profile():\n    out = model(x)"
ALIVE = 'print("alive", float(loss) > 0)'
CELLS = [
    "%load_ext trainium_lens",
    MODEL,
    OPTIMIZER,
    STEP,
    AFTER,
    PREDICT,
    STATEMENT,
    RAISES,
    BAD_OPTION,
    SYNTAX,
    OWN_PROFILER,
    ALIVE,
]
ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture(scope="module")
def executed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path]:
    """The notebook executed once in a kernel running this interpreter."""
    return execute(tmp_path_factory.mktemp("notebook"), CELLS)


def test_the_cell_prints_its_table_and_how_many_times_it_ran(executed: tuple[Any, Path]) -> None:
    nb, _work = executed
    out = text_of(nb, STEP)
    ran = re.search(r"the cell ran (\d+) times", out)
    assert ran and int(ran.group(1)) > 3, out
    assert "side effects happened" in out
    for text in ("out = model(x)", "loss.backward()", "opt.step()", "h = torch.relu(self.fc(x))"):
        assert text in out, out
    page = html_of(nb, STEP)  # the same table as HTML, a heat bar on each line
    assert "<td class='src'>opt.step()</td>" in page and "tl-bar" in page, page
    assert f"<td>cell {cell_rel(MODEL).split('/')[1]}:12</td>" in page, page
    everything = json.dumps([c.outputs for c in nb.cells])
    assert "profiler_start" not in everything  # the profiler library's own lines dropped
    assert not errors_of(nb, STEP)


def test_the_next_cell_reads_the_cells_variables(executed: tuple[Any, Path]) -> None:
    nb, _work = executed
    assert re.fullmatch(r"after: loss=\d+\.\d{4} out=\(16, 8\)\n", text_of(nb, AFTER))


def test_the_stored_result_has_each_phase_at_its_cell_line(executed: tuple[Any, Path]) -> None:
    _nb, work = executed
    result = result_for(work, STEP)
    step, model = cell_rel(STEP), cell_rel(MODEL)
    # lines as the editor numbers them in their cells: the %% line is line 1
    assert line(result, step, 2).text == "out = model(x)"
    assert line(result, step, 5).text == "loss.backward()"
    forward = line(result, model, 12)  # the model's forward, three cells up
    assert forward.text == "h = torch.relu(self.fc(x))"
    assert forward.self_time_us > 0 and forward.backward_self_time_us > 0
    assert line(result, model, 13).backward_self_time_us > 0
    stepping = [o for o in result.optimizers if o.name.startswith("Optimizer.step")]
    assert [(o.file, o.line) for o in stepping] == [(step, 6)]
    assert stepping[0].self_time_us > 0
    assert result.reconciliation is not None and result.reconciliation.reference == "wall"
    assert result.reconciliation.reference_us > 0
    # the cell's figure against the wall as a marked function's: the one the fit did not touch
    assert result.fit is not None
    assert result.reconciliation.profiled_us == result.fit.unfitted_us


def test_a_statement_is_profiled_through_the_cells_it_calls(executed: tuple[Any, Path]) -> None:
    nb, work = executed
    assert "`predict(x)` ran" in text_of(nb, STATEMENT)
    result = result_for(work, STATEMENT)
    predict = line(result, cell_rel(PREDICT), 2)
    assert predict.text == "return model(batch).softmax(-1)" and predict.total_time_us > 0
    assert line(result, cell_rel(MODEL), 12).self_time_us > 0


def test_a_cell_that_raises_shows_the_users_error_at_its_cell_line(executed: tuple[Any, Path]) -> None:
    nb, work = executed
    [error] = errors_of(nb, RAISES)
    assert (error.ename, error.evalue) == ("ValueError", "the user's own error")
    shown = ANSI.sub("", "\n".join(error.traceback))
    assert re.search(r"----> 3 raise ValueError", shown), shown
    assert "File " not in shown and "harness" not in shown, shown  # no frame of the tool's
    assert not [r for r in RunStore(work).load_all() if r.function.file == cell_rel(RAISES)]
    assert text_of(nb, ALIVE) == "alive True\n"  # the kernel and its namespace survived


def test_a_bad_option_is_one_usage_line(executed: tuple[Any, Path]) -> None:
    nb, _work = executed
    said = text_of(nb, BAD_OPTION, "stderr").strip().splitlines()
    assert len(said) == 1 and said[0].startswith("UsageError: unrecognized arguments: --stpes"), said
    assert "usage: %%trainium_lens [--steps N:M]" in said[0]
    assert not text_of(nb, BAD_OPTION)


def test_a_syntax_error_is_shown_at_its_cell_line_without_the_tools_frames(
    executed: tuple[Any, Path],
) -> None:
    nb, _work = executed
    [error] = errors_of(nb, SYNTAX)
    assert error.ename == "SyntaxError" and "never closed" in error.evalue
    shown = ANSI.sub("", "\n".join(error.traceback))
    assert re.search(r"Cell In\[\d+\], line 3\n", shown) and "loss = (out - y" in shown, shown
    assert "magic" not in shown and "run_cell_magic" not in shown, shown


def test_a_cell_running_its_own_profiler_is_one_line_and_the_kernel_lives(executed: tuple[Any, Path]) -> None:
    nb, work = executed
    said = text_of(nb, OWN_PROFILER, "stderr").strip().splitlines()
    assert len(said) == 1 and "starts torch.profiler itself" in said[0], said
    assert not [r for r in RunStore(work).load_all() if r.function.file == cell_rel(OWN_PROFILER)]
    assert text_of(nb, ALIVE) == "alive True\n"


def test_json_writes_the_stored_result(executed: tuple[Any, Path]) -> None:
    _nb, work = executed
    written = json.loads((work / "step.json").read_text(encoding="utf-8"))
    assert written["run_id"] == result_for(work, STEP).run_id

"""A ``%%trainium_lens`` cell that loops over its own steps (an optimizer stepping
in a ``for``): run once, its steps N..M profiled as ``run`` profiles a script's,
in a real ipykernel executed by nbclient (docs/notebooks.md, "A cell that loops")."""

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
    line,
    result_for,
    results_for,
    text_of,
)
from tests.integration.notebook.test_magic import MODEL, OPTIMIZER
from trainium_lens.model.store import RunStore

# the model's parameters before the loop, and a twin trained by the same loop
# without the magic: the loop cell must leave the model as that one run would
TWIN = """\
import copy
twin = copy.deepcopy(model)
twin_opt = torch.optim.SGD(twin.parameters(), lr=0.01)"""
LOOP = """\
%%trainium_lens --steps 3:4 --json loop.json
made = 0
for i in range(20):
    out = model(x)
    loss = ((out - y) ** 2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    made += 1"""
AFTER = """\
for i in range(20):
    twin_loss = ((twin(x) - y) ** 2).mean()
    twin_loss.backward()
    twin_opt.step()
    twin_opt.zero_grad()
same = all(torch.equal(a, b) for a, b in zip(model.parameters(), twin.parameters()))
from torch.optim import optimizer as _o
print("made", made, "same", same, "own step", "step" in opt.__dict__,
      "hooks", len(_o._global_optimizer_pre_hooks) + len(_o._global_optimizer_post_hooks))"""
DEFAULT_STEPS = """\
%%trainium_lens
for i in range(30):
    loss = model(x).sum()
    loss.backward()
    opt.step()
    opt.zero_grad()"""
SHORT = """\
%%trainium_lens --steps 3:5
short = 0
for i in range(4):
    model(x).sum().backward()
    opt.step()
    short += 1"""
RAISES = """\
%%trainium_lens --steps 3:4
for i in range(20):
    model(x).sum().backward()
    opt.step()
    if i == 4:
        raise RuntimeError(f"diverged at {i}")"""
ALIVE = """print("alive", short, "own step", "step" in opt.__dict__)"""
CELLS = ["%load_ext trainium_lens", MODEL, OPTIMIZER, TWIN, LOOP, AFTER, DEFAULT_STEPS, SHORT, RAISES, ALIVE]
ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture(scope="module")
def executed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path]:
    # one thread: the twin's twenty steps and the cell's are bit for bit the same arithmetic
    return execute(tmp_path_factory.mktemp("loop"), CELLS, {"OMP_NUM_THREADS": "1"})


def test_the_loop_ran_once_and_the_header_says_so(executed: tuple[Any, Path]) -> None:
    nb, _work = executed
    out = text_of(nb, LOOP)
    assert "the cell ran once, its loop's own steps 3..4 profiled" in out, out
    assert "20 optimizer steps made" in out and "times under the profiler's protocol" not in out, out
    assert not errors_of(nb, LOOP)
    # as if run without the magic: twenty steps, the model where a plain twin's twenty put it,
    # and nothing of the tool's left on the optimizer or in torch's global hooks
    assert text_of(nb, AFTER) == "made 20 same True own step False hooks 0\n"


def test_each_phase_sits_on_the_loops_lines_and_the_model_cells(executed: tuple[Any, Path]) -> None:
    _nb, work = executed
    result = result_for(work, LOOP)
    loop, model = cell_rel(LOOP), cell_rel(MODEL)
    assert result.script is not None and result.script.detector == "optimizer"
    assert line(result, loop, 4).text == "out = model(x)" and line(result, loop, 4).total_time_us > 0
    assert line(result, loop, 6).text == "loss.backward()"
    forward = line(result, model, 12)  # the model's forward, in its own cell
    assert forward.text == "h = torch.relu(self.fc(x))"
    assert forward.self_time_us > 0 and forward.backward_self_time_us > 0
    assert line(result, model, 13).backward_self_time_us > 0
    stepping = [o for o in result.optimizers if o.name.startswith("Optimizer.step")]
    assert [(o.file, o.line) for o in stepping] == [(loop, 7)]
    assert stepping[0].self_time_us > 0
    assert not [ln for ln in result.lines if ln.file == loop and ln.line == 1]  # the magic's line: none
    assert result.reconciliation is not None and result.reconciliation.reference_us > 0


def test_steps_are_honoured(executed: tuple[Any, Path]) -> None:
    _nb, work = executed
    asked = result_for(work, LOOP)
    assert asked.script.steps == [3, 4] and asked.script.profiled_steps == [3, 6]  # cpu: with twins
    assert asked.stability.steps_wanted == 2
    default = result_for(work, DEFAULT_STEPS)  # run's default window
    assert default.script.steps == [3, 5] and default.stability.steps_wanted == 3
    written = json.loads((work / "loop.json").read_text(encoding="utf-8"))
    assert written["run_id"] == asked.run_id


def test_a_loop_too_short_for_its_steps_is_one_line_and_ran_once(executed: tuple[Any, Path]) -> None:
    nb, work = executed
    said = text_of(nb, SHORT, "stderr").strip().splitlines()
    assert len(said) == 1 and said[0].startswith("UsageError: the cell ran once and its loop made 4 "), said
    assert "--steps 3:5 needs 8" in said[0], said
    assert not results_for(work, SHORT)
    assert text_of(nb, ALIVE) == "alive 4 own step False\n"  # its four steps ran once


def test_a_loop_that_raises_shows_the_users_error_and_keeps_nothing(executed: tuple[Any, Path]) -> None:
    nb, work = executed
    [error] = errors_of(nb, RAISES)
    assert (error.ename, error.evalue) == ("RuntimeError", "diverged at 4")
    shown = ANSI.sub("", "\n".join(error.traceback))
    assert re.search(r"----> 6 +raise RuntimeError", shown), shown
    assert "harness" not in shown, shown
    assert not results_for(work, RAISES)
    # no run folder but the stored results' (the short loop's and this one's went)
    folders = list((work.parent / "cache").glob("*/runs/*"))
    assert len(folders) == len(RunStore(work).load_all()) == 2, folders

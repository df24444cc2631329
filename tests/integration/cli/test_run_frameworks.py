"""``trainium-lens run`` on the loops training frameworks write (docs/scripts.md,
"Training frameworks"): where a step ends and what it holds.

* a plain loop with an LR scheduler (``tests/data/scripts/scheduled.py``): the
  scheduler replaces ``optimizer.step`` on the instance when it is built, and the
  step must still end where the optimizer's ``step()`` returns, outside torch's
  ``Optimizer.step#…`` range, never inside it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.cli.test_run import lens_run, project


@pytest.fixture(scope="module")
def scheduled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, str]:
    tmp = tmp_path_factory.mktemp("scheduled")
    ws = project(tmp)
    out = tmp / "out.json"
    proc, _ = lens_run(ws, tmp, "--steps", "3:4", "--json", str(out), "--", "python", "scheduled.py")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return ws, json.loads(out.read_text()), proc.stdout


def _x_events(trace: dict, prefix: str) -> list[dict]:
    return sorted(
        (e for e in trace["traceEvents"] if e.get("ph") == "X" and e["name"].startswith(prefix)),
        key=lambda e: e["ts"],
    )


def test_an_lr_schedulers_loop_steps_end_after_the_optimizers_step_returns(scheduled) -> None:
    ws, doc, stdout = scheduled
    assert "step 14 loss" in stdout and "lr 0.000125" in stdout  # the scheduler ran as in a plain run
    assert doc["script"]["detector"] == "optimizer"
    src = (ws / "scheduled.py").read_text().splitlines()
    step_line = src.index("        optimizer.step()") + 1
    (adamw,) = [o for o in doc["optimizers"] if o["name"] == "Optimizer.step#AdamW.step"]
    assert adamw["line"] == step_line
    trace = json.loads(Path(doc["artifacts"]["trace"]).read_text())
    steps = _x_events(trace, "ProfilerStep#")
    ranges = _x_events(trace, "Optimizer.step#AdamW.step")
    assert len(steps) == len(ranges) == 4  # steps 3-6: each measured step and its twin
    for step, opt in zip(steps, ranges, strict=True):  # each step holds its optimizer's whole range
        assert step["ts"] <= opt["ts"] and opt["ts"] + opt["dur"] <= step["ts"] + step["dur"], (step, opt)

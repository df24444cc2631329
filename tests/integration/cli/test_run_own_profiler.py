"""``trainium-lens run`` on a script that already runs torch.profiler itself
(docs/scripts.md, "A script that profiles itself"): kineto runs one profiler per
process at a time, so ``run`` never starts its own beside the script's. The
script's own trace is what it is without the tool; the tool says in one line that
it stood aside, or, when the script's profiler starts after the window, keeps its
result (without the work step's figures if it started during that step).

``tests/data/scripts/selfprof_schedule.py`` profiles as the Trainium tutorials do
(a schedule, ``prof.step()`` per step, ``on_trace_ready``) and prints how many of
its steps its own trace holds: 3 without the tool. Before the fix, a profiler
entered around the loop whose schedule still waited, or one started inside the
window, got an empty trace ("0 steps recorded") while ``run`` wrote its result."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.cli.test_run import lens_run, one_line, project, run_folders, stored
from tests.support.procs import left_running

OWN = "own trace own-trace.json: 3 steps recorded"


@pytest.mark.parametrize(
    "args",
    [
        ["--wait", "4"],  # entered around the loop; its schedule still waits when the window would start
        ["--start-at", "4", "--wait", "0"],  # started inside the window (the script's step 5)
    ],
)
def test_a_script_profiling_itself_keeps_its_trace_and_run_stands_aside(tmp_path: Path, args: list) -> None:
    ws = project(tmp_path)
    proc, _ = lens_run(ws, tmp_path, "--", "python", "selfprof_schedule.py", *args)
    assert OWN in proc.stdout, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert proc.returncode == 1  # nothing stored, as for every run that leaves no result
    assert "the script runs torch.profiler itself" in one_line(proc.stderr)
    assert "stood aside" in one_line(proc.stderr)
    assert stored(ws) == [] and run_folders(tmp_path) == []
    assert left_running(str(tmp_path / "cache")) == []


def test_a_profiler_started_in_the_work_step_keeps_the_result_without_its_work(tmp_path: Path) -> None:
    ws = project(tmp_path)
    out = tmp_path / "out.json"
    # the script's step 9 (index 8) is the work step after the window 3-8
    proc, _ = lens_run(
        ws, tmp_path, "--no-store", "--json", str(out), "--",
        "python", "selfprof_schedule.py", "--start-at", "8", "--wait", "0",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert OWN in proc.stdout
    assert "started its own torch.profiler in the step after the window" in proc.stdout + proc.stderr
    doc = json.loads(out.read_text())
    assert doc["totals"]["self_time_us"] > 0 and doc.get("work") is None
    assert doc["reconciliation"]["reference_us"] > 0


def test_lightnings_own_pytorch_profiler_runs_and_run_stands_aside(tmp_path: Path) -> None:
    ws = project(tmp_path)
    proc, _ = lens_run(ws, tmp_path, "--", "python", "lit.py", "--steps", "12", "--profiler", "pytorch")
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "trained 12 steps" in proc.stdout
    assert "stood aside" in one_line(proc.stderr)
    (trace,) = ws.glob("fit-*.pt.trace.json")  # Lightning's PyTorchProfiler wrote its trace
    events = json.loads(trace.read_text())["traceEvents"]
    assert any("training_step" in str(e.get("name")) for e in events)
    assert not any("trainium_lens" in str(e.get("name")) for e in events)  # no range of the tool's in it
    assert stored(ws) == []

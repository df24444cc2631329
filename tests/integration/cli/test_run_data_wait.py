"""The step's wait for data under ``trainium-lens run``: a Dataset that works in
``__getitem__`` (16 samples × a 4 ms sleep per batch, in the main process) makes
the loop's ``for`` line wait; the harness times the DataLoader per step in the
unprofiled steps and the ``data_wait`` finding names the line. The sleeps are
the independent figure: the wait is at least 16 × 4 ms."""

from __future__ import annotations

import json
from pathlib import Path

from tests.integration.cli.test_run import lens_run, project
from trainium_lens.analysis.findings.data_wait import data_wait_findings
from trainium_lens.model.result import Result


def _for_line(path: Path) -> int:
    return next(
        i for i, s in enumerate(path.read_text().splitlines(), 1) if s.strip().startswith("for x, y in")
    )


def test_a_slow_loader_is_the_loops_wait_for_data(tmp_path: Path) -> None:
    ws = project(tmp_path)
    out = tmp_path / "out.json"
    proc, _ = lens_run(
        ws, tmp_path, "--no-store", "--steps", "3:4", "--json", str(out), "--", "python", "slow_loader.py"
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(out.read_text())
    s = doc["script"]
    assert (s["data_file"], s["data_line"]) == ("slow_loader.py", _for_line(ws / "slow_loader.py"))
    assert s["data_wait_us"] >= 16 * 4000  # the sleeps alone
    assert s["data_wait_us"] < doc["totals"]["wall_us_median"]
    (found,) = data_wait_findings(Result.from_dict(doc))  # withheld from the stored list when noisy
    assert found.kind == "data_wait" and found.line == s["data_line"]
    assert "num_workers" in (found.fix or "") and "faster" not in found.message
    kinds = [f["kind"] for f in doc["findings"]]
    assert "data_wait" in kinds or "noisy_measurement" in kinds


def test_a_fast_loader_waits_little_and_is_judged_by_its_own_share(tmp_path: Path) -> None:
    ws = project(tmp_path)
    out = tmp_path / "out.json"
    proc, _ = lens_run(
        ws, tmp_path, "--no-store", "--steps", "3:3", "--json", str(out), "--", "python", "tinylm/train.py"
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert doc["script"]["data_line"] == _for_line(ws / "tinylm" / "train.py")
    # an in-memory TensorDataset: the wait is measured, and a finding appears exactly when
    # it is a tenth of the step or more (how small it is depends on the host's load)
    wait, step = doc["script"]["data_wait_us"], doc["totals"]["wall_us_median"]
    assert 0 < wait < step
    assert bool(data_wait_findings(Result.from_dict(doc))) == (wait >= 0.1 * step), (wait, step)

"""``run -- torchrun --nproc-per-node 2``: the sibling rank is the job's, not outside load,
and an outside spinner (in a session of its own, as another user's job) is named.

The machine is shared, so nothing here asserts that a run is quiet or how long anything
took: the assertions are on the evidence's attribution (harness/runtime/outside.py,
analysis/noise.py) — the sibling rank's CPU in the job's share, never among the outside
processes nor in a noise verdict's reasons; the spinner's load flagging the run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.cli.test_run import lens_run, project

pytestmark = pytest.mark.slow

SPIN = "open('/proc/self/comm', 'w').write('lens-spinner')\nwhile True:\n    pass\n"


def _torchrun(tmp_path: Path, name: str) -> tuple[dict, dict[int, int]]:
    """The merged result and {rank: pid} of a 2-rank run of tinylm."""
    ws = project(tmp_path / name)
    out = tmp_path / f"{name}.json"
    proc, _ = lens_run(
        ws, tmp_path / name, "--steps", "3:4", "--json", str(out), "--",
        "torchrun", "--nproc-per-node", "2", "train.py", "--steps", "12",
        cwd=ws / "tinylm",
    )  # fmt: skip
    assert out.exists(), proc.stderr[-3000:]
    pids = {}
    for events in (tmp_path / name / "cache").rglob("events.jsonl"):
        for line in events.read_text().splitlines():
            e = json.loads(line)
            if e.get("event") == "hello" and e.get("role") == "worker":
                pids[e["rank"]] = e["pid"]
    assert sorted(pids) == [0, 1], pids
    return json.loads(out.read_text()), pids


def _said(doc: dict, kind: str) -> list[str]:
    return [f["message"] for f in doc["findings"] if f["kind"] == kind]


def test_the_sibling_rank_is_the_jobs_own_not_outside_load(tmp_path: Path) -> None:
    doc, pids = _torchrun(tmp_path, "alone")
    st = doc["stability"]  # rank 0's window: rank 1 ran beside it
    assert doc["world_size"] == 2 and st["cpus"] >= 1
    assert st["job_processes"] >= 2 and st["job_cores"] is not None and st["job_cores"] > 0, st
    sibling = f"(pid {pids[1]})"
    assert not any(sibling in top for top in st["outside_top"]), st
    for message in _said(doc, "noisy_measurement") + _said(doc, "outside_load"):
        assert sibling not in message and "job's other processes" not in message, message


def test_an_outside_spinner_is_named_in_the_evidence(tmp_path: Path) -> None:
    spinner = subprocess.Popen([sys.executable, "-c", SPIN], start_new_session=True)
    try:
        doc, pids = _torchrun(tmp_path, "spun")
    finally:
        spinner.kill()
        spinner.wait()
    st = doc["stability"]
    assert st["others_cores"] is not None and st["others_cores"] >= 0.5, st
    flags = _said(doc, "noisy_measurement") + _said(doc, "outside_load")
    assert len(flags) == 1 and "outside this job used" in flags[0], doc["findings"]
    assert not any(f"(pid {pids[1]})" in top for top in st["outside_top"]), st
    # the spinner took a CPU-bound process's share: among the few that used the most
    # unless the shared machine ran more such processes than are named
    named = [top for top in st["outside_top"] if top.startswith("lens-spinner ")]
    assert named or len(st["outside_top"]) == 3, st

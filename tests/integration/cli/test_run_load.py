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
import threading
from pathlib import Path

import pytest

from tests.integration.cli.test_run import lens_run, project

pytestmark = pytest.mark.slow

# named at once, it spins from the line it reads on until it is killed
SPIN = (
    "import sys\nopen('/proc/self/comm', 'w').write('lens-spinner')\n"
    "sys.stdin.readline()\nwhile True:\n    pass\n"
)


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


def _events(tmp: Path) -> list[dict]:
    events = []
    for path in (tmp / "cache").rglob("events.jsonl"):
        for line in path.read_text().splitlines():
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError:  # a line being written
                continue
    return events


def _spin_while_measured(spinner: subprocess.Popen, tmp: Path, done: threading.Event) -> None:
    """Set the spinner going once a rank is armed (before its first step, so before the
    window, which starts after step 2 of both ranks) and kill it once rank 0's result is
    written (after its window): it spins while the window is measured, not while the
    ranks import torch nor while the CLI reads the result (~20 s of CPU less)."""
    assert spinner.stdin is not None
    while not done.wait(0.05):
        if any(e.get("event") == "armed" for e in _events(tmp)):
            spinner.stdin.write(b"go\n")
            spinner.stdin.flush()
            break
    while not done.wait(0.05):
        if any(e.get("event") == "result" and e.get("rank") == 0 for e in _events(tmp)):
            break
    spinner.kill()


def test_an_outside_spinner_is_named_in_the_evidence(tmp_path: Path) -> None:
    spinner = subprocess.Popen([sys.executable, "-c", SPIN], stdin=subprocess.PIPE, start_new_session=True)
    done = threading.Event()
    watch = threading.Thread(target=_spin_while_measured, args=(spinner, tmp_path / "spun", done))
    watch.start()
    try:
        doc, pids = _torchrun(tmp_path, "spun")
    finally:
        done.set()
        watch.join()
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

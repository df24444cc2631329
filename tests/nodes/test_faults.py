"""Faults of a job across the lab's nodes (docs/nodes.md): a rank that hangs,
a node that dies, an allocation that never starts — each one line naming the
node, within its bound, and nothing of the job left on any node or in squeue.
(The partitioned node: test_across_nodes.py.)"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from tests.nodes.test_across_nodes import SLOW, _cli, _job_left, _workspace
from tests.support.lab import Lab, lab_up
from tests.support.procs import wait_for

pytestmark = pytest.mark.nodes

# Global rank 3 (node2's second rank) never reaches the collective.
HANGS = """\
import time

import torch
import torch.distributed as dist


def make():
    return (torch.ones(4),)


# trainium: profile inputs=make wait=0 warmup=0 active=2 timing_calls=1
def step(x):
    if dist.get_rank() == 3:
        time.sleep(600)
    t = x.sum().reshape(1)
    dist.all_reduce(t)
    return t
"""


def _errors(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.startswith("trainium-lens:")]


@pytest.mark.parametrize("how", ["hosts", "slurm"])
def test_a_hung_rank_is_named_with_its_node_within_the_pg_timeout(lab: Lab, tmp_path: Path, how: str):
    ws = _workspace(tmp_path, "hangs.py", HANGS)
    where = ["--hosts", "node1,node2"] if how == "hosts" else ["--slurm", "login", "--nodes", "2"]
    proc = subprocess.run(
        _cli(lab, ws, "hangs.py", "step", where, "--pg-timeout", "15"),
        capture_output=True,
        text=True,
        timeout=240,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode != 0
    (line,) = _errors(proc.stderr)
    assert "node2 / rank 3 did not reach the collective" in line, proc.stderr[-3000:]
    wait_for(lambda: not _job_left(lab), 30, f"nothing of the job on the nodes: {_job_left(lab)}")
    wait_for(lambda: not lab.squeue(), 30, f"the job leaves squeue: {lab.squeue()}")


@pytest.mark.parametrize("how", ["hosts", "slurm"])
def test_a_node_that_dies_is_named(lab: Lab, tmp_path: Path, how: str):
    ws = _workspace(tmp_path, "slow.py", SLOW)
    log = tmp_path / "cli.log"
    where = ["--hosts", "node1,node2"] if how == "hosts" else ["--slurm", "login", "--nodes", "2"]
    proc = subprocess.Popen(
        _cli(lab, ws, "slow.py", "slow", where),
        stdout=subprocess.DEVNULL,
        stderr=log.open("w"),
        stdin=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: "calibrate" in log.read_text() or " step " in log.read_text(), 180, "the job runs")
        # node2 dies: every process on it (sshd and the job too) but the namespace holder
        for pid, cmd in lab.procs_on("node2").items():
            if cmd != "sleep infinity":
                subprocess.run(["kill", "-9", str(pid)], check=False)
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
        lab_up()  # brings node2 back (a fresh lab)
    assert code != 0
    (line,) = _errors(log.read_text())
    assert line.startswith("trainium-lens: node2:"), log.read_text()[-2000:]
    wait_for(lambda: not _job_left(lab), 30, f"nothing of the job on the nodes: {_job_left(lab)}")


def test_an_allocation_that_never_starts_times_out_named_and_cancelled(lab: Lab, tmp_path: Path):
    ws = _workspace(tmp_path, "slow.py", SLOW)
    t0 = time.monotonic()
    proc = subprocess.run(
        _cli(
            lab,
            ws,
            "slow.py",
            "slow",
            ["--slurm", "login", "--nodes", "2", "--slurm-arg=--begin=now+3600"],
            "--timeout",
            "10",
        ),
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode != 0
    (line,) = _errors(proc.stderr)
    assert "the allocation never started" in line and "pending (BeginTime)" in line, proc.stderr[-2000:]
    assert time.monotonic() - t0 < 10 + 30
    wait_for(lambda: not lab.squeue(), 30, f"the job leaves squeue: {lab.squeue()}")

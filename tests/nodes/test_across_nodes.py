"""A profile across the lab's two nodes (docs/nodes.md): over SSH (``--hosts``)
and through SLURM (``--slurm``), 2 nodes × 2 ranks of gloo on a real marked
function; the node made slower named in the straggler finding; a kill -9 of
the CLI under SLURM and a partitioned node leave nothing on any node."""

from __future__ import annotations

import json
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.lab import IFNAME, REPO_PYTHON, Lab
from tests.support.procs import wait_for

pytestmark = pytest.mark.nodes

IDLE = re.compile(r"^(sleep infinity|/usr/sbin/sshd |sshd: |munged |slurmctld|slurmscriptd|slurmd)")

# node2's ranks do sixteen times the matmuls, and at least ~20 ms of them a step: the
# straggler is on node2, on line `y = y @ x`. The lab's four ranks share this machine's two
# cores with other tests, and op times read on a wall clock while a rank is descheduled: at
# 3x (CI, 2026-12-01) the contended light ranks read within 8% of the heavy ones, and at 8x
# of 192x192 (CI, 2026-12-03: 2.5 ms a step on node2) a stalled light rank read 1.85 ms on
# the line, above node2's. A stall is a few scheduler slices, not a share of the work, so
# the heavy ranks' margin is made in milliseconds. One thread per rank for the same reason.
UNEVEN = """\
import socket

import torch
import torch.distributed as dist


def make():
    torch.manual_seed(0)
    return (torch.randn(384, 384) / 20,)


# trainium: profile inputs=make wait=0 warmup=1 active=3 timing_calls=2
def step(x):
    torch.set_num_threads(1)
    n = 32 if socket.gethostname() == "node2" else 2
    y = x
    for _ in range(n):
        y = torch.tanh(y @ x)
    t = y.sum().reshape(1)
    dist.all_reduce(t)
    return t
"""

SLOW = """\
import time

import torch
import torch.distributed as dist


def make():
    return (torch.ones(4),)


# trainium: profile inputs=make wait=0 warmup=0 active=60 timing_calls=1
def slow(x):
    time.sleep(1.0)
    t = x.sum().reshape(1)
    dist.all_reduce(t)
    return t
"""


def _workspace(tmp_path: Path, name: str, text: str) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    (ws / name).write_text(text)
    return ws


def _cli(lab: Lab, ws: Path, file: str, fn: str, where: list[str], *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "trainium_lens",
        "profile",
        str(ws / file),
        fn,
        *where,
        "--nproc",
        "2",
        "--ssh-config",
        str(lab.ssh_config),
        "--remote-python",
        REPO_PYTHON,
        "--ifname",
        IFNAME,
        "--workspace",
        str(ws),
        "--no-store",
        *extra,
    ]


def _job_left(lab: Lab) -> list[str]:
    return [f"{h}: {c}" for h in lab.hosts for c in lab.procs_on(h).values() if not IDLE.match(c)]


def _check_four_ranks(out: Path, stdout: str) -> None:
    result = json.loads(out.read_text())
    ranks = result["ranks"]
    assert [r["rank"] for r in ranks] == [0, 1, 2, 3]
    assert [r["node"] for r in ranks] == ["node1", "node1", "node2", "node2"]
    assert [r["node_rank"] for r in ranks] == [0, 0, 1, 1]
    assert [r["local_rank"] for r in ranks] == [0, 1, 0, 1]
    matmul = next(ln for ln in result["lines"] if "y @ x" in ln["text"])
    assert {p["node"] for p in matmul["per_rank"]} == {"node1", "node2"}
    # which rank read slowest on one line is a timing on a shared machine (CI has read rank 1):
    # the straggler finding below, on the whole step at 16x the work, names node2
    assert matmul["slowest_rank"] in (0, 1, 2, 3)
    straggler = [f for f in result["findings"] if f["kind"] == "straggler"]
    assert len(straggler) == 1, result["findings"]
    named = re.search(r"node2 / rank ([23]): \+\d+% on this line", straggler[0]["message"])
    assert named, straggler
    # named on the line where that rank loses the most against the median rank, by the result's
    # own per-rank figures: usually the matmul's (16x the work), but on a loaded machine one step's
    # stall on another line can outweigh it (CI once read 2.72 ms on `y.sum()`), which the
    # finding then rightly names
    slow = int(named.group(1))

    def loss(ln: dict) -> float:
        busy = {p["rank"]: p["self_time_us"] - p.get("collective_us", 0.0) for p in ln["per_rank"]}
        return busy.get(slow, 0.0) - statistics.median(busy.values()) if busy else 0.0

    assert straggler[0]["line"] == max(result["lines"], key=loss)["line"]
    assert re.search(r"node2 / rank [23] is the straggler", stdout)


@pytest.mark.parametrize("how", ["hosts", "slurm"])
def test_two_nodes_two_ranks_one_result_straggler_named_with_its_node(lab: Lab, tmp_path: Path, how: str):
    ws = _workspace(tmp_path, "uneven.py", UNEVEN)
    out = tmp_path / "result.json"
    where = ["--hosts", "node1,node2"] if how == "hosts" else ["--slurm", "login", "--nodes", "2"]
    proc = subprocess.run(
        _cli(lab, ws, "uneven.py", "step", where, "--json", str(out)),
        capture_output=True,
        text=True,
        timeout=240,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    _check_four_ranks(out, proc.stdout)
    assert "node1 / rank" in proc.stdout and "node2 / rank" in proc.stdout
    ranks = json.loads(out.read_text())["ranks"]
    if how == "hosts":  # each node's clock, probed over SSH; the lab's nodes share this kernel's
        for r in ranks:
            assert r["clock_uncertainty_ms"] >= 0, r
            assert abs(r["clock_offset_ms"]) <= r["clock_uncertainty_ms"] + 50, r
    else:  # the login host starts srun: no probe of the nodes' clocks from here
        assert all(r.get("clock_offset_ms") is None for r in ranks), ranks
    assert wait_for(lambda: not lab.squeue(), 30, "the job leaves squeue")
    assert wait_for(lambda: not _job_left(lab), 30, f"nothing of the job on the nodes: {_job_left(lab)}")


def _start_slow(lab: Lab, tmp_path: Path, where: list[str], *extra: str) -> tuple[subprocess.Popen, Path]:
    ws = _workspace(tmp_path, "slow.py", SLOW)
    log = tmp_path / "cli.log"
    proc = subprocess.Popen(
        _cli(lab, ws, "slow.py", "slow", where, *extra),
        stdout=subprocess.DEVNULL,
        stderr=log.open("w"),
        stdin=subprocess.DEVNULL,
    )
    return proc, log


def _ranks_running(lab: Lab) -> bool:
    return all(any("trainium_lens.harness" in c for c in lab.procs_on(h).values()) for h in lab.hosts)


def test_kill_9_of_the_cli_under_slurm_ends_the_job_on_every_node(lab: Lab, tmp_path: Path):
    proc, log = _start_slow(lab, tmp_path, ["--slurm", "login", "--nodes", "2"])
    try:
        wait_for(lambda: re.search(r"calibrate|step \d+/", log.read_text()), 180, "the job runs")
        assert wait_for(lambda: any(" R " in j for j in lab.squeue()), 30, "the job runs in squeue")
        assert _ranks_running(lab)
    finally:
        proc.kill()  # SIGKILL: no handler of ours runs
        proc.wait()
    t0 = time.monotonic()
    wait_for(lambda: not lab.squeue(), 40, f"the job leaves squeue: {lab.squeue()}")
    wait_for(lambda: not _job_left(lab), 40, f"nothing of the job on the nodes: {_job_left(lab)}")
    assert time.monotonic() - t0 < 40


def test_a_partitioned_node_is_named_in_one_line_and_nothing_is_left(lab: Lab, tmp_path: Path):
    proc, log = _start_slow(
        lab, tmp_path, ["--hosts", "node1,node2"], "--node-timeout", "8", "--pg-timeout", "30"
    )
    cut = False
    try:
        wait_for(lambda: re.search(r"calibrate|step \d+/", log.read_text()), 180, "the job runs")
        # The rendezvous store and gloo listen on the lab address only, never on every interface.
        # (slurmd, the lab's own daemon, listens on every address of its node: 6818.)
        listening = lab.run("node1", "ss -Hltn", check=True).stdout
        assert re.search(r"10\.231\.77\.11:\d+", listening), listening
        assert not re.search(r"(^|\s)(0\.0\.0\.0|\*|\[::\]):(?!6818\s)\d+", listening), listening
        subprocess.run(["ip", "-n", "tlens-node2", "link", "set", IFNAME, "down"], check=True)
        cut = True
        t0 = time.monotonic()
        code = proc.wait(timeout=60)
        took = time.monotonic() - t0
    finally:
        if cut:
            subprocess.run(["ip", "-n", "tlens-node2", "link", "set", IFNAME, "up"], check=True)
        if proc.poll() is None:
            proc.kill()
    err = [ln for ln in log.read_text().splitlines() if ln.startswith("trainium-lens:")]
    assert code != 0
    assert len(err) == 1 and "node2" in err[0] and "no answer" in err[0], log.read_text()[-2000:]
    assert took < 8 + 20, took  # the node timeout, plus stopping node1's part
    # node1's part was stopped at once; node2's ends once its ssh channel closes.
    wait_for(lambda: not _job_left(lab), 60, f"nothing of the job on the nodes: {_job_left(lab)}")


def test_doctor_checks_every_node_and_what_is_shared(lab: Lab):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "trainium_lens",
            "doctor",
            "--hosts",
            "node1,node2",
            "--ssh-config",
            str(lab.ssh_config),
            "--remote-python",
            REPO_PYTHON,
            "--ifname",
            IFNAME,
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=180,
        stdin=subprocess.DEVNULL,
    )
    reports = json.loads(proc.stdout)
    assert [r["host"] for r in reports] == ["node1", "node2", "node1,node2"]
    across = {c["name"]: c for c in reports[-1]["checks"]}
    assert across["nodes_reachable"]["status"] == "pass"
    assert across["same_stack"]["status"] == "pass" and "torch 2." in across["same_stack"]["detail"]
    assert across["clocks"]["status"] == "pass" and "node2" in across["clocks"]["detail"]
    assert across["ports"]["status"] == "pass" and "10.231.77.11:" in across["ports"]["detail"]
    # node2 cut off: the report says it, the cross-node checks do not pass
    subprocess.run(["ip", "-n", "tlens-node2", "link", "set", IFNAME, "down"], check=True)
    try:
        cut = subprocess.run(
            [*proc.args[:-1], "--json"], capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL
        )
    finally:
        subprocess.run(["ip", "-n", "tlens-node2", "link", "set", IFNAME, "up"], check=True)
    assert cut.returncode != 0
    reports = json.loads(cut.stdout)
    node2 = {c["name"]: c for c in reports[1]["checks"]}
    assert node2["ssh"]["status"] == "fail"
    assert {c["name"]: c for c in reports[-1]["checks"]}["nodes_reachable"]["status"] == "fail"

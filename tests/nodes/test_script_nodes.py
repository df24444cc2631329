"""The unmodified-script command across the lab's two nodes through ``srun``
(docs/scripts.md, "Across nodes"): ``trainium-lens run --host login -- srun …
torchrun --nnodes 2 … train.py`` profiles every rank on both nodes through the
same injection, one result with each rank's node; a kill -9 of the CLI ends the
job (``squeue`` empty, nothing on any node)."""

from __future__ import annotations

import json
import random
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import DATA, ROOT
from tests.nodes.test_across_nodes import _job_left
from tests.support.lab import IFNAME, REPO_PYTHON, Lab
from tests.support.procs import wait_for

pytestmark = pytest.mark.nodes


def _project(tmp_path: Path) -> Path:
    ws = tmp_path / "proj"
    shutil.copytree(DATA / "scripts", ws)
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    return ws


def _cli(
    lab: Lab, ws: Path, steps: int, *extra: str, srun: list[str] | None = None, args: tuple[str, ...] = ()
) -> list[str]:
    """``run --host login -- srun … torchrun …``: torchrun by name, as the user types it
    (the host's Python runs it: ``--remote-python``)."""
    port = random.randint(20000, 40000)
    launch = srun or [
        "srun",
        "-N2",
        "--ntasks-per-node=1",
        "torchrun",
        "--nnodes",
        "2",
        "--nproc-per-node",
        "2",
        "--rdzv-backend",
        "c10d",
        "--rdzv-endpoint",
        f"node1:{port}",
        "--rdzv-id",
        f"lens{port}",
    ]
    return [
        sys.executable,
        "-m",
        "trainium_lens",
        "run",
        "--host",
        "login",
        "--ssh-config",
        str(lab.ssh_config),
        "--remote-python",
        REPO_PYTHON,
        "--env",
        f"GLOO_SOCKET_IFNAME={IFNAME}",
        "--workspace",
        str(ws),
        "--no-store",
        *extra,
        "--",
        *launch,
        "train.py",
        "--steps",
        str(steps),
        *args,
    ]


def test_srun_torchrun_across_two_nodes_one_result_each_rank_with_its_node(lab: Lab, tmp_path: Path):
    ws = _project(tmp_path)
    out = tmp_path / "out.json"
    # 4 ranks share 48 batches: 12 steps each
    proc = subprocess.run(
        _cli(lab, ws, 48, "--steps", "3:3", "--json", str(out)),
        cwd=ws / "tinylm",
        capture_output=True,
        text=True,
        timeout=240,
        stdin=subprocess.DEVNULL,
    )
    # torch's own failures after every script ended (a rank aborted at interpreter exit by
    # gloo's threads, the c10d store gone: plain torchrun runs of this script show them too,
    # engine/script_exit.py) fail the command, named as such; anything else is a failure here
    if proc.returncode != 0:
        assert "every rank's script ran to its end (4 of 4) and the result is complete" in proc.stderr, (
            proc.stderr[-3000:]
        )
    assert "step 2 loss" in proc.stdout and "step 12 loss" in proc.stdout  # the script's own, to its end
    doc = json.loads(out.read_text())
    assert doc["script"]["launcher"] == "torchrun" and doc["script"]["detector"] == "optimizer"
    ranks = doc["ranks"]
    assert [r["rank"] for r in ranks] == [0, 1, 2, 3]
    assert [r["node"] for r in ranks] == ["node1", "node1", "node2", "node2"]
    assert [r["node_rank"] for r in ranks] == [0, 0, 1, 1]
    assert [r["local_rank"] for r in ranks] == [0, 1, 0, 1]
    model = [ln for ln in doc["lines"] if ln["file"] == "tinylm/model.py" and ln["self_time_us"] > 0]
    assert model, [ln["file"] for ln in doc["lines"]]
    for line in model:
        assert {p["node"] for p in line["per_rank"]} == {"node1", "node2"}, line["per_rank"]
    assert re.search(r"node1\s+0\s+0\s+0 ", proc.stdout) and re.search(r"node2\s+1\s+1\s+3 ", proc.stdout)
    assert wait_for(lambda: not lab.squeue(), 30, f"the job leaves squeue: {lab.squeue()}")
    assert wait_for(lambda: not _job_left(lab), 30, f"nothing of the job on the nodes: {_job_left(lab)}")


def test_a_rank_aborted_at_exit_on_node2_is_named_and_node1s_wait_is_stopped(lab: Lab, tmp_path: Path):
    """Rank 3 (node2) aborts as Python shuts down, after its script ended (what torch's gloo
    threads do in some plain runs): node2's agent fails the job, and node1's agent, whose
    workers succeeded, would wait 300 s in torch's exit barrier. The CLI stops the job once
    every script has ended (``targets/outcome.Waiting``), names the abort, keeps the result."""
    ws = _project(tmp_path)
    out = tmp_path / "out.json"
    t0 = time.monotonic()
    proc = subprocess.run(
        _cli(lab, ws, 48, "--steps", "3:3", "--json", str(out), args=("--abort-at-exit", "3")),
        cwd=ws / "tinylm",
        capture_output=True,
        text=True,
        timeout=240,
        stdin=subprocess.DEVNULL,
    )
    took = time.monotonic() - t0
    said = " ".join(proc.stderr.split())
    assert proc.returncode == 1, said[-3000:]
    assert "every rank's script ran to its end (4 of 4) and the result is complete" in said, said[-3000:]
    assert "rank 3 on node2 was aborted (SIGABRT) as Python shut down" in said, said[-3000:]
    assert "waiting in torch's exit barrier" in said and took < 120, (took, said[-3000:])
    assert [r["node"] for r in json.loads(out.read_text())["ranks"]] == ["node1", "node1", "node2", "node2"]
    assert wait_for(lambda: not lab.squeue(), 30, f"the job leaves squeue: {lab.squeue()}")
    assert wait_for(lambda: not _job_left(lab), 30, f"nothing of the job on the nodes: {_job_left(lab)}")


def test_srun_tasks_without_torchrun_are_ranks_by_their_task_id(lab: Lab, tmp_path: Path):
    """``srun -N2 python train.py``: each task one armed process, its rank srun's task id
    (the script runs undistributed in each: no WORLD_SIZE)."""
    ws = _project(tmp_path)
    out = tmp_path / "out.json"
    proc = subprocess.run(
        _cli(lab, ws, 12, "--steps", "3:3", "--json", str(out), srun=["srun", "-N2", "-n2", "python"]),
        cwd=ws / "tinylm",
        capture_output=True,
        text=True,
        timeout=240,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert doc["script"]["launcher"] == "python"
    assert [(r["rank"], r["node"], r["node_rank"]) for r in doc["ranks"]] == [
        (0, "node1", 0),
        (1, "node2", 1),
    ]
    assert wait_for(lambda: not lab.squeue(), 30, f"the job leaves squeue: {lab.squeue()}")


def test_kill_9_of_the_cli_ends_the_srun_job_on_every_node(lab: Lab, tmp_path: Path):
    ws = _project(tmp_path)
    log = tmp_path / "cli.log"
    proc = subprocess.Popen(
        _cli(lab, ws, 400_000, "--steps", "3:3"),  # runs on for minutes after the window
        cwd=ws / "tinylm",
        stdout=subprocess.DEVNULL,
        stderr=log.open("w"),
        stdin=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: "runs on unprofiled" in log.read_text(), 180, "the window is profiled")
        assert any(" R " in j for j in lab.squeue()), lab.squeue()
        assert _job_left(lab), "the ranks run on the nodes"
    finally:
        proc.kill()  # SIGKILL: no handler of ours runs
        proc.wait()
    t0 = time.monotonic()
    wait_for(lambda: not lab.squeue(), 30, f"the job leaves squeue: {lab.squeue()}")
    wait_for(lambda: not _job_left(lab), 30, f"nothing of the job on the nodes: {_job_left(lab)}")
    assert time.monotonic() - t0 < 30


def test_on_the_login_host_itself_a_kill_9_of_the_cli_ends_the_job(lab: Lab, tmp_path: Path):
    """``trainium-lens run -- srun …`` typed on the login host (no ``--host``): srun is
    no Python, so nothing of ours is in it; it gets SIGTERM from the kernel when the
    CLI dies (``PR_SET_PDEATHSIG``) and ends its job."""
    ws = _project(tmp_path)
    port = random.randint(20000, 40000)
    launch = (
        f"srun -N2 --ntasks-per-node=1 {REPO_PYTHON} -m torch.distributed.run --nnodes 2 --nproc-per-node 2 "
        f"--rdzv-backend c10d --rdzv-endpoint node1:{port} --rdzv-id lens{port} train.py --steps 400000"
    )
    err, pid = tmp_path / "cli.err", tmp_path / "cli.pid"
    started = lab.run(
        "login",
        f"cd {ws / 'tinylm'} && (GLOO_SOCKET_IFNAME={IFNAME} PYTHONPATH={ROOT / 'server'} "
        f"setsid {REPO_PYTHON} -m trainium_lens run --no-store --steps 3:3 --workspace {ws} -- {launch} "
        f"</dev/null >/dev/null 2>{err} & echo $! > {pid})",
        check=True,
    )
    assert started.returncode == 0
    wait_for(lambda: err.is_file() and "runs on unprofiled" in err.read_text(), 180, "the window is profiled")
    assert any(" R " in j for j in lab.squeue()), lab.squeue()
    lab.run("login", f"kill -9 $(cat {pid})", check=True)
    t0 = time.monotonic()
    wait_for(lambda: not lab.squeue(), 30, f"the job leaves squeue: {lab.squeue()}")
    wait_for(lambda: not _job_left(lab), 30, f"nothing of the job on the nodes: {_job_left(lab)}")
    assert time.monotonic() - t0 < 30

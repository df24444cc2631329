"""A SLURM job that SLURM itself ends during a run, in the lab's real cluster: a
``scancel`` from outside the tool, and a node whose ``slurmd`` the controller loses
(``NODE_FAIL`` once ``SlurmdTimeout``, 60 s in the lab, has passed). The CLI names
that cause in one line (harness/nodes/slurm_end.py), not the torch lines its ranks
print as they are stopped (``SignalException: Process … got signal: 15``); a result
made before is kept, nothing of the job stays in squeue or on a node."""

from __future__ import annotations

import random
import re
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.nodes.test_across_nodes import SLOW, _job_left, _workspace
from tests.nodes.test_across_nodes import _cli as _profile_cli
from tests.nodes.test_script_nodes import _cli, _project
from tests.support.lab import IFNAME, REPO_PYTHON, Lab
from tests.support.procs import wait_for

pytestmark = pytest.mark.nodes

TORCH_SAYS = "SignalException"  # what torchrun's agents print when SLURM stops them


def _errors(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.startswith("trainium-lens:")]


def _start(lab: Lab, ws: Path, log: Path, steps: str) -> subprocess.Popen:
    """``run --host login -- srun … torchrun … train.py`` of a script that runs for
    minutes, its result stored (no ``--no-store``)."""
    argv = [a for a in _cli(lab, ws, 400_000, "--steps", steps) if a != "--no-store"]
    return subprocess.Popen(
        argv, cwd=ws / "tinylm", stdout=subprocess.DEVNULL, stderr=log.open("w"), stdin=subprocess.DEVNULL
    )


def _job(lab: Lab) -> str:
    (line,) = [j for j in lab.squeue() if " R " in j]
    return line.split()[0]


def _stored(ws: Path) -> dict[str, bytes]:
    runs = ws / ".trainium-lens" / "runs"
    return {p.name: p.read_bytes() for p in sorted(runs.glob("*.json"))} if runs.is_dir() else {}


def _scancel(lab: Lab, proc: subprocess.Popen) -> tuple[int, float, str]:
    job = _job(lab)
    t0 = time.monotonic()
    lab.run("login", f"scancel {job}", check=True)
    code = proc.wait(timeout=120)
    took = time.monotonic() - t0
    print(f"scancel of job {job} -> the CLI's exit: {took:.2f} s")  # the report's number (-s)
    return code, took, job


def test_a_scancel_is_named_the_result_made_before_kept_and_nothing_left(lab: Lab, tmp_path: Path):
    ws = _project(tmp_path)
    # 1. cancelled after the window: the result is complete, stored, and the line says why the
    # command failed (the old code said nothing, or torchrun's agent's SignalException)
    log = tmp_path / "after.log"
    proc = _start(lab, ws, log, "3:3")
    try:
        wait_for(lambda: "runs on unprofiled" in log.read_text(), 180, "the window is profiled")
        code, _took, job = _scancel(lab, proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    said = " ".join(log.read_text().split())
    assert code != 0, said[-2000:]
    assert re.search(
        rf"warning: the window's result is complete; then the SLURM job {job} was cancelled "
        r"at \S+ \(scancel\)",
        said,
    ), said[-2000:]
    stored = _stored(ws)
    assert len(stored) == 1, stored.keys()
    wait_for(lambda: not lab.squeue(), 30, f"the job leaves squeue: {lab.squeue()}")
    wait_for(lambda: not _job_left(lab), 30, f"nothing of the job on the nodes: {_job_left(lab)}")

    # 2. cancelled while the ranks are armed, before the window: named, nothing stored, the
    # result of 1 intact
    log = tmp_path / "before.log"
    proc = _start(lab, ws, log, "300000:300000")
    try:
        wait_for(lambda: "steps found by the" in log.read_text(), 180, "the ranks are armed and step")
        code, took, job = _scancel(lab, proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    text = log.read_text()
    assert TORCH_SAYS in text  # torch's own lines are there, and not what the CLI names
    (line,) = _errors(text)
    assert re.fullmatch(
        rf"trainium-lens: the SLURM job {job} was cancelled at \S+ \(scancel\), before the window "
        r"\(steps 300000:300000\) was complete \(exit status \d+ from srun; nothing stored\)",
        line,
    ), line
    assert code != 0 and took < 60, (code, took)
    assert _stored(ws) == stored
    wait_for(lambda: not lab.squeue(), 30, f"the job leaves squeue: {lab.squeue()}")
    wait_for(lambda: not _job_left(lab), 30, f"nothing of the job on the nodes: {_job_left(lab)}")


def test_a_scancel_under_profile_slurm_is_named(lab: Lab, tmp_path: Path):
    ws = _workspace(tmp_path, "slow.py", SLOW)
    log = tmp_path / "cli.log"
    proc = subprocess.Popen(
        _profile_cli(lab, ws, "slow.py", "slow", ["--slurm", "login", "--nodes", "2"]),
        stdout=subprocess.DEVNULL,
        stderr=log.open("w"),
        stdin=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: "calibrate" in log.read_text() or " step " in log.read_text(), 180, "the job runs")
        code, took, job = _scancel(lab, proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    (line,) = _errors(log.read_text())
    # the old line: "srun ended (exit status 143) before node(s) 0, 1 reported a result on
    # node[1-2]: W… torch/distributed/elastic/multiprocessing/api.py… closing signal SIGTERM"
    assert re.fullmatch(
        rf"trainium-lens: the SLURM job {job} was cancelled at \S+ \(scancel\); "
        r"srun ended \(exit status \d+\) before node\(s\) 0, 1 reported a result",
        line,
    ), line
    assert code == 130 and took < 60, (code, took)
    wait_for(lambda: not lab.squeue(), 30, f"the job leaves squeue: {lab.squeue()}")
    wait_for(lambda: not _job_left(lab), 30, f"nothing of the job on the nodes: {_job_left(lab)}")


def test_a_node_whose_slurmd_is_lost_is_named(lab: Lab, tmp_path: Path):
    """node2's slurmd dies (its job's processes live on): the controller takes node2
    for down after SlurmdTimeout and ends the job NODE_FAIL; the CLI names node2. What
    ran on node2 stays until its slurmd is back (nothing else can reach it there), which
    then ends it at once."""
    ws = _project(tmp_path)
    log = tmp_path / "cli.log"
    proc = _start(lab, ws, log, "300000:300000")
    try:
        wait_for(lambda: "steps found by the" in log.read_text(), 180, "the ranks are armed and step")
        job = _job(lab)
        (slurmd,) = [pid for pid, cmd in lab.procs_on("node2").items() if cmd.split()[:1] == ["slurmd"]]
        t0 = time.monotonic()
        subprocess.run(["kill", "-9", str(slurmd)], check=True)
        code = proc.wait(timeout=240)
        print(f"slurmd of node2 killed -> the CLI's exit: {time.monotonic() - t0:.1f} s")
    finally:
        if proc.poll() is None:
            proc.kill()
        lab.restart_slurmd("node2")
    (line,) = _errors(log.read_text())
    assert code != 0
    assert re.fullmatch(
        rf"trainium-lens: node2 \(Not responding\) went down \(the controller lost its slurmd\): SLURM ended "
        rf"the job {job} with NODE_FAIL at \S+, before the window \(steps 300000:300000\) was complete "
        r"\(exit status \d+ from srun; nothing stored\)",
        line,
    ), line
    wait_for(lambda: not lab.squeue(), 30, f"the job leaves squeue: {lab.squeue()}")
    wait_for(lambda: not _job_left(lab), 30, f"nothing of the job on the nodes: {_job_left(lab)}")


def test_a_scancel_of_an_allocation_still_pending_is_named(lab: Lab, tmp_path: Path):
    """Before any task ran Python there is no ``hello`` to name the job: srun's own
    ``srun: job N queued and waiting for resources`` does (the wrapper on the login host
    reads it); the old line was "the harness never armed in srun"."""
    ws = _project(tmp_path)
    log = tmp_path / "cli.log"
    srun = ["srun", "-N2", "--ntasks-per-node=1", "--begin=now+3600", "python"]
    proc = subprocess.Popen(
        _cli(lab, ws, 12, srun=srun),
        cwd=ws / "tinylm",
        stdout=subprocess.DEVNULL,
        stderr=log.open("w"),
        stdin=subprocess.DEVNULL,
    )
    try:
        wait_for(
            lambda: "queued and waiting for resources" in log.read_text(), 120, "srun waits in the queue"
        )
        (line,) = lab.squeue()
        job = line.split()[0]
        lab.run("login", f"scancel {job}", check=True)
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    (said,) = _errors(log.read_text())
    assert re.fullmatch(
        rf"trainium-lens: the SLURM job {job} was cancelled at \S+ \(scancel\) before any rank armed "
        r"\(srun's exit status \d+; nothing stored\)",
        said,
    ), log.read_text()[-2000:]
    assert code != 0
    wait_for(lambda: not lab.squeue(), 30, f"the job leaves squeue: {lab.squeue()}")


def test_on_the_login_host_itself_a_scancel_is_named(lab: Lab, tmp_path: Path):
    """``trainium-lens run -- srun …`` typed on the login host (no ``--host``): this CLI
    runs srun itself and asks SLURM (targets/script.py)."""
    ws = _project(tmp_path)
    port = random.randint(20000, 40000)
    launch = (
        f"srun -N2 --ntasks-per-node=1 {REPO_PYTHON} -m torch.distributed.run --nnodes 2 --nproc-per-node 2 "
        f"--rdzv-backend c10d --rdzv-endpoint node1:{port} --rdzv-id lens{port} train.py --steps 400000"
    )
    err, rc = tmp_path / "cli.err", tmp_path / "cli.rc"
    lab.run(
        "login",
        f"cd {ws / 'tinylm'} && (GLOO_SOCKET_IFNAME={IFNAME} PYTHONPATH={ROOT / 'server'} setsid sh -c "
        f"'{REPO_PYTHON} -m trainium_lens run --no-store --steps 300000:300000 --workspace {ws} -- {launch} "
        f"</dev/null >/dev/null 2>{err}; echo $? > {rc}' >/dev/null 2>&1 &)",
        check=True,
    )
    wait_for(lambda: err.is_file() and "steps found by the" in err.read_text(), 180, "the ranks are armed")
    job = _job(lab)
    lab.run("login", f"scancel {job}", check=True)
    wait_for(rc.is_file, 90, "the CLI ends")
    (line,) = _errors(err.read_text())
    assert re.fullmatch(
        rf"trainium-lens: the SLURM job {job} was cancelled at \S+ \(scancel\), before the window "
        r"\(steps 300000:300000\) was complete \(exit status \d+ from srun; nothing stored\)",
        line,
    ), line
    assert wait_for(lambda: rc.read_text().strip(), 10, "the status is written") != "0"
    wait_for(lambda: not lab.squeue(), 30, f"the job leaves squeue: {lab.squeue()}")
    wait_for(lambda: not _job_left(lab), 30, f"nothing of the job on the nodes: {_job_left(lab)}")

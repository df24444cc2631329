"""``trainium-lens run --host`` against a real sshd on loopback (the "host" is this
machine, its work dir a temp folder): the workspace synced, the unmodified
script run there with the host's Python, its output streamed back, the result
per line on the model file; a timeout and a killed CLI leave nothing on the host."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.integration.cli.test_run import BIN, lens_run, project, stored
from tests.integration.cli.test_run_frameworks import ACCELERATE_DEFAULTS
from tests.support.procs import left_running

pytestmark = pytest.mark.ssh


def _host(sshd, work: Path) -> list[str]:
    return [
        "--host",
        "lens-test",
        "--ssh-config",
        str(sshd.config),
        "--remote-python",
        sys.executable,
        "--work-dir",
        str(work),
    ]


def test_run_over_ssh_per_line_on_the_model_file(sshd, ssh_control_dir, tmp_path: Path) -> None:
    ws = project(tmp_path)
    work = tmp_path / "work"
    out = tmp_path / "out.json"
    proc, _ = lens_run(
        ws,
        tmp_path,
        *_host(sshd, work),
        "--steps",
        "2:2",
        "--json",
        str(out),
        "--env",
        "EXTRA_FLAG=1",
        "--",
        "python",
        "train.py",
        "--steps",
        "8",
        cwd=ws / "tinylm",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    for k in (1, 2, 8):  # the script's own output, streamed back
        assert f"step {k} loss" in proc.stdout
    assert "done" in proc.stderr
    assert (work / "src" / "tinylm" / "model.py").is_file()  # synced
    doc = json.loads(out.read_text())
    assert doc["host"] == "lens-test"
    assert doc["script"]["detector"] == "optimizer"
    assert doc["function"]["file"] == "tinylm/train.py"
    model = [ln for ln in doc["lines"] if ln["file"] == "tinylm/model.py"]
    assert any(ln["self_time_us"] > 0 for ln in model)
    assert any(ln["backward_self_time_us"] > 0 for ln in model)
    assert len(stored(ws)) == 1
    assert [p.name for p in (work / "runs").iterdir()] == [doc["batch_id"]]  # its stored result names it
    assert left_running(str(work)) == []


def test_accelerate_launch_runs_there_as_its_module_under_the_hosts_python(
    sshd, ssh_control_dir, tmp_path: Path
) -> None:
    """``accelerate launch`` is a console script with no interpreter word for the host's
    Python to replace: it runs there as ``python -m accelerate.commands.launch``."""
    ws = project(tmp_path)
    work = tmp_path / "work"
    out = tmp_path / "out.json"
    proc, _ = lens_run(
        ws, tmp_path, *_host(sshd, work), "--no-store", "--steps", "3:3", "--json", str(out), "--",
        "accelerate", "launch", "--cpu", "--num_processes", "1", *ACCELERATE_DEFAULTS, "hf/accelerated.py",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "12 updates on 1 processes" in proc.stdout
    doc = json.loads(out.read_text())
    assert doc["host"] == "lens-test" and doc["script"]["launcher"] == "accelerate"
    # the host's python ran it (the stored command keeps the word it replaced)
    assert doc["script"]["command"][:3] == ["python", "-m", "accelerate.commands.launch"]
    assert doc["script"]["micro_batches"] == 2  # a step is an update, as here
    assert left_running(str(work)) == []


def test_timeout_leaves_nothing_on_the_host(sshd, ssh_control_dir, tmp_path: Path) -> None:
    ws = project(tmp_path)
    work = tmp_path / "work"
    proc, _ = lens_run(
        ws,
        tmp_path,
        *_host(sshd, work),
        "--timeout",
        "10",
        "--",
        "python",
        "tinylm/train.py",
        "--steps",
        "100000",  # minutes of steps (its data: 800 MB made before the first)
    )
    assert proc.returncode != 0
    assert "timed out after 10 s" in proc.stderr, proc.stderr[-2000:]
    assert stored(ws) == [] and list((work / "runs").iterdir()) == []  # its run folder went on the host
    assert left_running(str(work)) == []
    assert left_running(str(tmp_path / "cache"), besides=" -N -f ") == []


def test_a_killed_cli_leaves_nothing_on_the_host(sshd, ssh_control_dir, tmp_path: Path) -> None:
    ws = project(tmp_path)
    work = tmp_path / "work"
    env = {
        **os.environ,
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(ROOT / "server"),
        "TRAINIUM_LENS_CACHE": str(tmp_path / "cache"),
    }
    cli = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "trainium_lens",
            "run",
            *_host(sshd, work),
            "--",
            "python",
            "tinylm/train.py",
            "--steps",
            "100000",
        ],
        cwd=ws,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert cli.stdout is not None
        deadline = time.monotonic() + 180
        for line in cli.stdout:  # the script runs on the host
            if line.startswith("step 3 loss") or time.monotonic() > deadline:
                break
        assert left_running(str(work), seconds=0) != []  # it is running there now
        cli.send_signal(signal.SIGKILL)
        cli.wait(timeout=30)
    finally:
        if cli.poll() is None:
            cli.kill()
    assert left_running(str(work), seconds=30) == []
    # nor here: the run's ssh is gone (the shared master stays, as ControlPersist keeps it)
    assert left_running(str(tmp_path / "cache"), besides=" -N -f ") == []


def test_run_queues_behind_another_run_of_the_hosts_work_dir(sshd, ssh_control_dir, tmp_path: Path) -> None:
    """``run --host`` takes the work dir's lock as a profile does (two runs at once on
    one host would disturb each other's figures): it says it waits, then runs."""
    ws = project(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    # Stand-in for another run: hold the flock a run holds on the host.
    holder = os.open(work / "lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(holder, fcntl.LOCK_EX)
    env = {
        **os.environ,
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(ROOT / "server"),
        "TRAINIUM_LENS_CACHE": str(tmp_path / "cache"),
    }
    argv = [sys.executable, "-m", "trainium_lens", "run", *_host(sshd, work), "--", "python"]
    cli = subprocess.Popen(
        [*argv, "tinylm/train.py", "--steps", "12"],
        cwd=ws,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    assert cli.stderr is not None
    reader = threading.Thread(target=lambda: lines.extend(iter(cli.stderr.readline, "")), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 120
        while not any("another run is using this host's work dir" in ln for ln in lines):
            assert time.monotonic() < deadline and cli.poll() is None, "".join(lines)[-2000:]
            time.sleep(0.1)
        assert not [ln for ln in lines if "steps found" in ln]  # the script has not started
    finally:
        fcntl.flock(holder, fcntl.LOCK_UN)
        os.close(holder)
    out, _ = cli.communicate(timeout=300)
    reader.join(10)
    assert cli.returncode == 0, "".join(lines)[-3000:]
    assert "step 12 loss" in out
    assert len(stored(ws)) == 1

"""What the profiled code starts outside its process group ends with the run:
a child in a session of its own (``start_new_session=True``, common for helper
servers) and a double-forked daemon (re-parented away from its starter). The
real CLI and harness; each way of stopping (a successful run, cancel, timeout,
kill -9 of the CLI, a torchrun job); after each a /proc scan finds nothing of
the run (the children carry the run's ``TRAINIUM_LENS_CACHE`` in their
environment) and the children's own pids are gone."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.support.procs import left_running, stop_as, wait_for

SPAWNS = """\
import os
import subprocess
import sys
import time

import torch

PIDS = os.environ["LENS_TEST_PIDS"]


def helpers():
    # once per process (a rank each under torchrun)
    mine = f"{PIDS}.{os.getpid()}"
    if os.path.exists(mine):
        return
    server = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
    read, write = os.pipe()
    if os.fork() == 0:  # a daemon: fork, setsid, fork again, the middle one exits
        os.setsid()
        grandchild = os.fork()
        if grandchild == 0:
            os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(600)"])
        os.write(write, str(grandchild).encode())
        os._exit(0)
    daemon = int(os.read(read, 32))
    with open(mine, "w") as f:
        f.write(f"{server.pid} {daemon}")
    os.replace(mine, mine + ".pids")
    open(mine, "w").close()


def make():
    return (torch.ones(4),)


# trainium: profile inputs=make wait=0 warmup=0 active=1 timing_calls=1
def quick(x):
    helpers()
    return x * 2


# trainium: profile inputs=make wait=0 warmup=0 active=1 timing_calls=1
def hangs(x):
    helpers()
    time.sleep(300)
    return x
"""


def start(ws: Path, tmp: Path, *args: str) -> tuple[subprocess.Popen, str]:
    cache = tmp / "cache"
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT / "server"),
        "TRAINIUM_LENS_CACHE": str(cache),
        "LENS_TEST_PIDS": str(tmp / "helpers"),
        "OMP_NUM_THREADS": "1",
    }
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "trainium_lens",
            "profile",
            str(ws / "spawns.py"),
            *args,
            "--workspace",
            str(ws),
        ],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return proc, f"TRAINIUM_LENS_CACHE={cache}"


def run_folders(tmp: Path) -> list[str]:
    return sorted(p.name for p in (tmp / "cache").glob("*/runs/*"))


def helper_pids(tmp: Path) -> list[int]:
    return [int(p) for f in sorted(tmp.glob("helpers.*.pids")) for p in f.read_text().split()]


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def assert_none_left(marker: str, pids: list[int]) -> None:
    assert pids, "the profiled code started no helpers"
    assert left_running(marker) == []
    assert [p for p in pids if alive(p)] == []


@pytest.fixture
def ws(tmp_path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "spawns.py").write_text(SPAWNS)
    return root


@pytest.mark.parametrize("nproc", ["1", "2"])
def test_nothing_the_code_started_outlives_a_successful_run(ws, tmp_path, nproc):
    proc, marker = start(ws, tmp_path, "quick", "--nproc", nproc, "--no-store")
    out, err = proc.communicate(timeout=400)
    assert proc.returncode == 0, err
    pids = helper_pids(tmp_path)
    assert len(pids) == 2 * int(nproc)
    assert_none_left(marker, pids)
    assert run_folders(tmp_path) == []  # not stored: its run folder goes with it


@pytest.mark.parametrize("nproc", ["1", "2"])
@pytest.mark.parametrize("how", ["cancel", "timeout", "kill -9"])
def test_nothing_the_code_started_outlives_a_stopped_run(ws, tmp_path, how, nproc):
    # The timeout counts from the CLI's start: the helpers start in 2–4 s on a quiet
    # machine, but under the parallel suite (3 workers, sshd and SLURM on 2 cores) two
    # ranks importing torch took more than 15 s, and the run ended before they did.
    extra = ["--timeout", "60"] if how == "timeout" else []
    proc, marker = start(ws, tmp_path, "hangs", "--nproc", nproc, *extra)

    def every_rank_started_its_helpers() -> bool:
        if proc.poll() is not None:  # say so now, not after the wait's 300 s
            raise AssertionError(f"the run ended ({proc.returncode}) first: {proc.communicate()[1]}")
        return len(helper_pids(tmp_path)) == 2 * int(nproc)

    try:
        wait_for(every_rank_started_its_helpers, 300, "the helpers started")
        stop_as(proc, how)
        assert_none_left(marker, helper_pids(tmp_path))
        if how != "kill -9":  # a CLI killed outright removes nothing; the next prune does
            assert run_folders(tmp_path) == []
    finally:
        proc.kill()
        proc.communicate()

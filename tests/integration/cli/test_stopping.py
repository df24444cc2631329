"""No way of stopping the CLI leaves code running: real processes, killed with
SIGKILL (nothing to catch), found with /proc scans by this test's
``TRAINIUM_LENS_CACHE`` in their environment. After each, nothing is running and
the temp dir the run was given is as empty as before (no ``torchelastic_*``
folder). Also: the torchrun rendezvous listens on loopback only, and ``nproc`` is
bounded by the host."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.support.procs import cmdline, left_running, listening, ppid, wait_for
from tests.support.ranks_cases import HANGS, job_processes, wait_for_files

SLOW = """\
import os
import time

import torch


def make():
    started = os.environ["LENS_TEST_STARTED"]
    with open(started + ".part", "w") as f:
        f.write(str(os.getpid()))
    os.replace(started + ".part", started)  # whole: the test reads it once it exists
    return (torch.ones(4),)


# trainium: profile inputs=make wait=0 warmup=0 active=1 timing_calls=1
def slow(x):
    time.sleep(300)
    return x
"""


def start_cli(ws: Path, tmp: Path, *args: str) -> tuple[subprocess.Popen, str]:
    """``trainium-lens profile ARGS`` in the background; (process, marker)."""
    cache = tmp / "cache"
    (tmp / "tmpdir").mkdir(exist_ok=True)
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT / "server"),
        "TRAINIUM_LENS_CACHE": str(cache),
        "TMPDIR": str(tmp / "tmpdir"),
        "LENS_TEST_STARTED": str(tmp / "started"),
        "OMP_NUM_THREADS": "1",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "trainium_lens", "profile", *args, "--workspace", str(ws)],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return proc, f"TRAINIUM_LENS_CACHE={cache}"


def assert_clean(marker: str, tmp: Path) -> None:
    assert left_running(marker) == []
    assert sorted(p.name for p in (tmp / "tmpdir").iterdir()) == []


@pytest.fixture
def ws(tmp_path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "slow.py").write_text(SLOW)
    (root / "hangs.py").write_text(HANGS)
    return root


def test_kill_9_of_the_cli_ends_its_harness(ws, tmp_path):
    proc, marker = start_cli(ws, tmp_path, str(ws / "slow.py"))
    try:
        wait_for_files([tmp_path / "started"])  # the harness is in the user's code
        harness = int((tmp_path / "started").read_text())
        assert "trainium_lens.harness" in cmdline(harness) and ppid(harness) == proc.pid
        proc.kill()
        proc.wait(10)
        assert_clean(marker, tmp_path)
    finally:
        proc.kill()
        proc.communicate()


def test_kill_9_of_the_cli_ends_launcher_agent_and_ranks_and_the_store_is_loopback(ws, tmp_path):
    proc, marker = start_cli(ws, tmp_path, str(ws / "hangs.py"))
    try:
        wait_for_files([ws / "hangs.py.rank0", ws / "hangs.py.rank1"])  # both ranks in user code
        pids = job_processes(marker)
        agents = [p for p in pids if "trainium_lens.harness.torchrun.agent" in cmdline(p)]
        assert len(agents) == 1 and len(pids) >= 5, [
            cmdline(p) for p in pids
        ]  # cli, launcher, agent, 2 ranks
        # The rendezvous store and gloo listen on loopback only (never on every interface).
        sockets = listening(pids)
        assert any(pid == agents[0] for pid, _, _ in sockets), sockets  # the agent's store
        assert all(addr in ("127.0.0.1", "::1") for _, addr, _ in sockets), sockets
        proc.kill()
        proc.wait(10)
        assert_clean(marker, tmp_path)
    finally:
        proc.kill()
        proc.communicate()


@pytest.mark.parametrize("when", ["ranks starting", "ranks running"])
def test_a_killed_torchrun_agent_is_reported_at_once_and_takes_its_ranks(ws, tmp_path, when):
    proc, marker = start_cli(ws, tmp_path, str(ws / "hangs.py"), "--timeout", "240")
    try:

        def agent_with_ranks() -> int | None:
            pids = job_processes(marker)
            for agent in pids:
                if "torchrun.agent" in cmdline(agent) and any(ppid(p) == agent for p in pids):
                    return agent
            return None

        if when == "ranks running":
            wait_for_files([ws / "hangs.py.rank0", ws / "hangs.py.rank1"])
        agent = wait_for(agent_with_ranks, 120, "torchrun's agent starting ranks")
        assert isinstance(agent, int)
        os.kill(agent, signal.SIGKILL)
        killed = time.monotonic()
        _out, err = proc.communicate(timeout=120)
        assert time.monotonic() - killed < 30  # not the 240 s timeout
        assert proc.returncode == 4, err  # the host could not run it (not the user's code)
        last = err.strip().splitlines()[-1]
        assert "torchrun's agent was killed by SIGKILL" in last, err
        assert_clean(marker, tmp_path)
    finally:
        proc.kill()
        proc.communicate()


def test_nproc_is_bounded_by_the_host(ws, tmp_path):
    cores = len(os.sched_getaffinity(0))
    proc, marker = start_cli(ws, tmp_path, str(ws / "slow.py"), "--nproc", "999")
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 2  # a bad option
    assert err.strip().splitlines()[-1] == (
        f"trainium-lens: nproc=999 is more ranks than this host can run: it has {cores} CPU "
        f"core{'s' if cores != 1 else ''} (a rank each): use nproc={cores} or fewer"
    )
    assert not list((tmp_path / "cache").rglob("torchrun"))  # no agent was started
    assert_clean(marker, tmp_path)

"""``run`` owns its command's whole process tree, as ``profile`` owns the harness's
(tests/integration/cli/test_descendants.py): a child in a session of its own, a
double-forked daemon and a plain child the script leaves behind all end with the
run, however it ends (the script's own end, Ctrl-C, timeout, kill -9 of the CLI);
the run ends at the script's exit, not when a daemon lets go of its output. The
real CLI and harness; after each a /proc scan finds nothing of the run (every
process carries the run's ``TRAINIUM_LENS_CACHE``) and the children's pids are gone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.integration.cli.test_descendants import alive, assert_none_left, helper_pids
from tests.support.procs import stop_as, wait_for

SCRIPT = """\
import os
import subprocess
import sys
import time

import torch

SLEEPER = [sys.executable, "-c", "import time; time.sleep(600)"]


def helpers():
    pids = os.environ["LENS_TEST_PIDS"]
    server = subprocess.Popen(SLEEPER, start_new_session=True)
    plain = subprocess.Popen(SLEEPER)  # holds our stdout and stderr, as `sleep 60 &` would
    read, write = os.pipe()
    if os.fork() == 0:  # a daemon: fork, setsid, fork again, the middle one exits
        os.setsid()
        grandchild = os.fork()
        if grandchild == 0:
            os.execv(sys.executable, SLEEPER)
        os.write(write, str(grandchild).encode())
        os._exit(0)
    daemon = int(os.read(read, 32))
    with open(f"{pids}.{os.getpid()}", "w") as f:
        f.write(f"{server.pid} {plain.pid} {daemon}")
    os.replace(f"{pids}.{os.getpid()}", f"{pids}.{os.getpid()}.pids")


model = torch.nn.Linear(8, 8)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
helpers()
for step in range(6):
    model(torch.ones(4, 8)).sum().backward()
    opt.step()
    opt.zero_grad()
print("trained", flush=True)
if "--hang" in sys.argv:
    time.sleep(300)
"""


def start(ws: Path, tmp: Path, *args: str) -> tuple[subprocess.Popen, str]:
    cache = tmp / "cache"
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(ROOT / "server"),
        "TRAINIUM_LENS_CACHE": str(cache),
        "LENS_TEST_PIDS": str(tmp / "helpers"),
        "OMP_NUM_THREADS": "1",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "trainium_lens", "run", *args],
        cwd=ws,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return proc, f"TRAINIUM_LENS_CACHE={cache}"


@pytest.fixture
def ws(tmp_path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "spawns.py").write_text(SCRIPT)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def test_nothing_the_script_started_outlives_a_successful_run(ws, tmp_path):
    proc, marker = start(ws, tmp_path, "--steps", "2:2", "--no-store", "--", "python", "spawns.py")
    # the run ends at the script's exit: its children hold the CLI's stdout and stderr
    # until they are gone, so a run that waited for them would never be read to its end
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
    assert "trained" in out
    pids = helper_pids(tmp_path)
    assert len(pids) == 3
    assert_none_left(marker, pids)


@pytest.mark.parametrize("how", ["cancel", "timeout", "kill -9"])
def test_nothing_the_script_started_outlives_a_stopped_run(ws, tmp_path, how):
    extra = ["--timeout", "60"] if how == "timeout" else []
    proc, marker = start(ws, tmp_path, "--steps", "2:2", *extra, "--", "python", "spawns.py", "--hang")

    def started() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"the run ended ({proc.returncode}) first: {proc.communicate()[1][-3000:]}")
        return len(helper_pids(tmp_path)) == 3

    try:
        wait_for(started, 300, "the helpers started")
        stop_as(proc, how)
        assert_none_left(marker, helper_pids(tmp_path))
    finally:  # the helpers first: they hold the CLI's output, and the read would wait for them
        for pid in helper_pids(tmp_path):  # never leave a sleeper behind, even on failure
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        proc.kill()
        proc.communicate()

"""``run --host`` owns its command's whole process tree on the host, as a local
``run`` does (tests/integration/cli/test_run_descendants.py): the CLI returns at
the script's exit, not when a background child, a child in a session of its own
or a double-forked daemon lets go of the script's output, and none of them is
left running on the host (each carries the host's work dir in its environment)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.integration.cli.test_descendants import alive, helper_pids
from tests.integration.cli.test_run_descendants import SCRIPT
from tests.ssh.test_script_run import _host
from tests.support.procs import left_running

pytestmark = pytest.mark.ssh


def test_run_on_a_host_ends_with_the_script_and_leaves_nothing_there(sshd, ssh_control_dir, tmp_path: Path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "spawns.py").write_text(SCRIPT)
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    work = tmp_path / "work"
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(ROOT / "server"),
        "TRAINIUM_LENS_CACHE": str(tmp_path / "cache"),
        "OMP_NUM_THREADS": "1",
    }
    cli = subprocess.Popen(
        [sys.executable, "-m", "trainium_lens", "run", *_host(sshd, work), "--steps", "2:2", "--no-store"]
        + ["--env", f"LENS_TEST_PIDS={tmp_path / 'helpers'}", "--", "python", "spawns.py"],
        cwd=ws,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # the sleepers (600 s) hold the script's stdout and stderr: a run that waited
        # for them would not be read to its end here
        out, err = cli.communicate(timeout=300)
        assert cli.returncode == 0, err[-3000:]
        assert "trained" in out
        pids = helper_pids(tmp_path)
        assert len(pids) == 3
        assert left_running(str(work)) == []
        assert [p for p in pids if alive(p)] == []
    finally:  # the helpers first: they hold the CLI's output, and the read would wait for them
        for pid in helper_pids(tmp_path):
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        cli.kill()
        cli.communicate()

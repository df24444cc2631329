"""Over the real sshd on loopback (the "host" is this machine): two overlapping
CLI runs share the host's master without breaking each other; a kill -9 of the
CLI ends the run on the host; a harness killed there is reported as such; run
folders on the host go with their pruned results; and a crafted result that
names this host cannot replace a folder here. After each, nothing is running."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.ssh.test_cancel import host_processes
from tests.support.procs import cmdline, wait_for
from trainium_lens.engine import runner
from trainium_lens.model.job import make_job
from trainium_lens.model.store import RunStore
from trainium_lens.targets.ssh.conn import SshConnection
from trainium_lens.targets.ssh.target import SshTarget

pytestmark = pytest.mark.ssh

SOURCE = """\
import os
import time

import torch


def make_inputs():
    return (torch.ones(8),)


# trainium: profile inputs=make_inputs wait=0 warmup=0 active=1 timing_calls=1
def quick(x):
    return x + 1


# trainium: profile inputs=make_inputs wait=0 warmup=0 active=1 timing_calls=1
def pause(x):
    time.sleep(0.5)  # ~15 calls in all (first calls, settling, steps, timing): the lock is held ~10 s
    return x * 2


# trainium: profile inputs=make_inputs wait=0 warmup=0 active=1 timing_calls=1
def forever(x):
    pid_file = os.path.join(os.path.dirname(__file__), "forever.pid")
    with open(pid_file + ".part", "w") as f:
        f.write(str(os.getpid()))
    os.replace(pid_file + ".part", pid_file)  # whole: the test reads it once it exists
    time.sleep(300)
    return x
"""


@pytest.fixture
def ws(tmp_path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "jobs.py").write_text(SOURCE)
    return root


def start_cli(sshd, ws: Path, work: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "trainium_lens",
            "profile",
            str(ws / "jobs.py"),
            *args,
            "--workspace",
            str(ws),
            "--host",
            "lens-test",
            "--ssh-config",
            str(sshd.config),
            "--remote-python",
            sys.executable,
            "--work-dir",
            str(work),
        ],
        env={**os.environ, "PYTHONPATH": str(ROOT / "server")},  # the control dir: ssh_control_dir's
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def gone(work: Path, seconds: float = 10.0) -> list[str]:
    deadline = time.monotonic() + seconds
    while host_processes(work) and time.monotonic() < deadline:
        time.sleep(0.1)
    return host_processes(work)


def test_two_overlapping_runs_share_the_master_and_both_finish(sshd, ssh_control_dir, ws, tmp_path):
    work = tmp_path / "work"
    first = start_cli(sshd, ws, work, "pause")
    try:
        wait_for(lambda: (work / "lock").exists() and host_processes(work), 120, "the first run on the host")
        second = start_cli(sshd, ws, work, "quick")  # waits for the host's lock over the same master
        try:
            out1, err1 = first.communicate(timeout=180)
            out2, err2 = second.communicate(timeout=180)
        finally:
            second.kill()
        assert first.returncode == 0, err1
        assert second.returncode == 0, err2  # not "exit status 255": the first run's end kept the master
        assert "pause" in out1 and "quick" in out2
        assert "[queue]" in err2
    finally:
        first.kill()
    # the last user closed it: no master left running for 10 minutes
    assert not SshConnection("lens-test", ssh_config=str(sshd.config))._master_alive()
    assert gone(work) == []


def test_kill_9_of_the_cli_ends_the_run_on_the_host(sshd, ssh_control_dir, ws, tmp_path):
    work = tmp_path / "work"
    cli = start_cli(sshd, ws, work, "forever", "--timeout", "600")
    try:
        pid_file = work / "src" / "forever.pid"  # the synced copy runs on the "host"
        wait_for(pid_file.exists, 120, "the function running on the host")
        harness = int(pid_file.read_text())
        assert "trainium_lens.harness" in cmdline(harness)
        cli.kill()
        cli.wait(10)
        assert gone(work) == []  # the wrapper saw the end of its stdin, not a 600 s timeout
    finally:
        cli.kill()
        cli.communicate()


def test_a_harness_killed_on_the_host_is_reported_as_killed(sshd, ssh_control_dir, ws, tmp_path):
    work = tmp_path / "work"
    cli = start_cli(sshd, ws, work, "forever")
    try:
        pid_file = work / "src" / "forever.pid"  # the synced copy runs on the "host"
        wait_for(pid_file.exists, 120, "the function running on the host")
        os.kill(int(pid_file.read_text()), signal.SIGKILL)  # as the OOM killer would
        _out, err = cli.communicate(timeout=60)
        assert cli.returncode == 4, err
        last = err.strip().splitlines()[-1]
        assert last == (
            "trainium-lens: lens-test: the harness ended without a result: killed by SIGKILL (out of memory?)"
        ), err
        assert gone(work) == []
    finally:
        cli.kill()
        cli.communicate()


def test_run_folders_on_the_host_go_with_their_results(sshd, ssh_control_dir, ws, tmp_path):
    work = tmp_path / "work"
    target = SshTarget(
        "lens-test", ssh_config=str(sshd.config), remote_python=sys.executable, work_dir=str(work)
    )
    store = RunStore(ws, history=1)
    try:
        [first] = runner.profile(make_job(ws / "jobs.py", functions=["quick"]), target, store=store)
        assert (work / "runs" / first.batch_id).is_dir()
        [second] = runner.profile(make_job(ws / "jobs.py", functions=["quick"]), target, store=store)
    finally:
        target.close()
    assert sorted(p.name for p in (work / "runs").iterdir()) == [second.batch_id]
    assert [r.run_id for r in store.load_all()] == [second.run_id]


def test_a_crafted_result_naming_this_host_cannot_replace_a_folder_here(sshd, ssh_control_dir, ws, tmp_path):
    """The attack a committed result made before: a run id that climbs out of the
    artifacts cache, a host the user has keys for, a folder there as the trace.
    Before: ``export`` fetched it and replaced ``<tmp>/victim`` with it."""
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "id_ed25519").write_text("secret\n")
    decoy = tmp_path / "host-side" / "victim"
    decoy.mkdir(parents=True)
    (decoy / "planted").write_text("attacker's\n")
    data = json.loads((ROOT / "tests" / "data" / "schema1_result.json").read_text())
    data.update(run_id="../../..", batch_id="b")
    data["artifacts"] = {"location": "lens-test", "run_dir": str(decoy.parent), "trace": str(decoy)}
    runs = ws / ".trainium-lens" / "runs"
    runs.mkdir(parents=True)
    (runs / "crafted.json").write_text(json.dumps(data))
    for command in (["export", "crafted", "-o", str(tmp_path / "out.json")], ["fetch", "crafted"]):
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "trainium_lens",
                *command,
                "--workspace",
                str(ws),
                "--ssh-config",
                str(sshd.config),
            ],
            env={**os.environ, "PYTHONPATH": str(ROOT / "server")},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr == "trainium-lens: result.run_id: not a valid run id: '../../..'\n"
    assert sorted(p.name for p in victim.iterdir()) == ["id_ed25519"]
    assert (victim / "id_ed25519").read_text() == "secret\n"
    assert not (tmp_path / "out.json").exists()
    assert not SshConnection("lens-test", ssh_config=str(sshd.config))._master_alive()  # never connected


def test_a_committed_result_naming_a_host_file_outside_run_folders_copies_nothing(
    sshd, ssh_control_dir, ws, tmp_path
):
    """Before: `artifacts.run_dir`/`trace` naming `~/.aws` on a host of the user's
    SSH config made `fetch` (and the timeline, `export`) copy it into the
    workspace, where it stayed after the error."""
    secrets = sshd.home / "keys"
    secrets.mkdir(exist_ok=True)
    (secrets / "credentials").write_text("aws_secret_access_key = hunter2\n")
    # A run folder of this workspace on the host exists (a real run made it),
    # and a link in it leads to the secrets: resolved on the host, refused too.
    work = sshd.home / ".cache" / "trainium-lens"
    target = SshTarget("lens-test", ssh_config=str(sshd.config), remote_python=sys.executable)
    try:
        [real] = runner.profile(make_job(ws / "jobs.py", functions=["quick"]), target, store=RunStore(ws))
    finally:
        target.close()
    host_runs = Path(real.artifacts.run_dir).parent
    assert work in host_runs.parents
    (host_runs / "b").symlink_to(secrets)
    data = json.loads((ROOT / "tests" / "data" / "schema1_result.json").read_text())
    runs = ws / ".trainium-lens" / "runs"
    cases = {
        "20261129-101500-aaaa-0": (str(secrets), str(secrets / "credentials")),
        "20261129-101500-bbbb-0": (str(host_runs / "b"), str(host_runs / "b" / "credentials")),
    }
    for run_id, (run_dir, trace) in cases.items():
        data.update(run_id=run_id, batch_id=run_id[:-2], created_at="2026-11-29T10:15:00+00:00")
        data["artifacts"] = {"location": "lens-test", "run_dir": run_dir, "trace": trace}
        (runs / f"{run_id}.json").write_text(json.dumps(data))
        for command in (["fetch", run_id], ["export", run_id, "-o", str(tmp_path / "out.json")]):
            proc = subprocess.run(
                [sys.executable, "-m", "trainium_lens", *command, "--workspace", str(ws)]
                + ["--ssh-config", str(sshd.config)],
                env={**os.environ, "PYTHONPATH": str(ROOT / "server")},
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert proc.returncode == 4, proc.stderr
            assert "not in a run folder of this workspace on the host" in proc.stderr, proc.stderr
            assert proc.stderr.count("\n") == 1
    copies = [p for p in (ws / ".trainium-lens").rglob("*") if p.name in ("credentials", "keys")]
    assert copies == [] and not (tmp_path / "out.json").exists()
    assert not [p for p in (ws / ".trainium-lens" / "artifacts").rglob("*") if p.is_file()]


@pytest.mark.parametrize(
    ("how", "nproc"),
    [("success", 1), ("cancel", 1), ("timeout", 1), ("kill -9", 1), ("success", 2), ("kill -9", 2)],
)
def test_nothing_the_code_started_outlives_the_run_on_the_host(sshd, ssh_control_dir, tmp_path, how, nproc):
    """A child in a session of its own and a double-forked daemon, started by the
    profiled code on the host (by each rank of a torchrun job): gone after a
    successful run, a cancel (Ctrl-C), a timeout and kill -9 of the CLI (the
    wrapper's lifeline; the harness and each rank are their subreapers)."""
    from tests.integration.cli.test_descendants import SPAWNS, alive, helper_pids

    ws = tmp_path / "ws"
    ws.mkdir()
    source = SPAWNS.replace('os.environ["LENS_TEST_PIDS"]', repr(str(tmp_path / "helpers")))
    (ws / "jobs.py").write_text(source)
    work = tmp_path / "work"
    # the timeout counts from the CLI's start: the helpers start in ~3 s on a quiet
    # machine, in more than 15 s under the parallel suite (see test_descendants)
    extra = ["--timeout", "60"] if how == "timeout" else []
    fn = "quick" if how == "success" else "hangs"
    cli = start_cli(sshd, ws, work, fn, "--no-store", "--nproc", str(nproc), *extra)
    try:
        if how in ("success", "timeout"):
            _out, err = cli.communicate(timeout=300)
            assert cli.returncode == (0 if how == "success" else 124), err
        else:
            wait_for(lambda: len(helper_pids(tmp_path)) == 2 * nproc, 300, "the helpers started on the host")
            if how == "cancel":
                cli.send_signal(signal.SIGINT)
                assert cli.wait(60) == 130
            else:
                cli.kill()
                cli.wait(10)
        pids = helper_pids(tmp_path)
        assert len(pids) == 2 * nproc
        assert gone(work) == []
        wait_for(lambda: not [p for p in pids if alive(p)], 15, "the helpers gone")
    finally:
        cli.kill()
        cli.communicate()

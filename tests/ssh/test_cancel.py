"""Stopping remote runs (real sshd on loopback, the "host" is this machine):
cancel, timeout and a dropped connection leave no process on the host and no
change in the stored results; a busy work dir queues or refuses clearly."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from trainium_lens.engine import runner
from trainium_lens.errors import Cancelled, TargetError, TimedOut
from trainium_lens.model.job import make_job
from trainium_lens.model.store import RunStore
from trainium_lens.targets.ssh.target import SshTarget

pytestmark = pytest.mark.ssh

FAST = {"wait": 0, "warmup": 0, "active": 1, "timing_calls": 1}
SLEEP_S = 120  # how long ``slow`` sleeps: a stopped run ends long before
SOURCE = f"""\
import os
import time

import torch


def make_inputs():
    return (torch.ones(8),)


# trainium: profile inputs=make_inputs
def quick(x):
    return x + 1


# trainium: profile inputs=make_inputs
def slow(x):
    open(__file__ + ".sleeping", "w").close()  # the tests act once this is there
    time.sleep({SLEEP_S})
    return x * 2
"""


@pytest.fixture
def ws(tmp_path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "jobs.py").write_text(SOURCE)
    return root


def _target(sshd, work: Path, **kw) -> SshTarget:
    return SshTarget(
        "lens-test", ssh_config=str(sshd.config), remote_python=sys.executable, work_dir=str(work), **kw
    )


def host_processes(work: Path) -> list[str]:
    """Processes on the "host" that belong to runs in ``work``: the wrapper (its
    argv names the work dir) and the harness and its children (cwd inside it)."""
    found = []
    root = str(work.resolve())
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            cwd = os.readlink(f"/proc/{entry}/cwd")
        except OSError:
            continue
        if root in cmdline or cwd.startswith(root):
            found.append(f"{entry}: {cmdline[:120]}")
    return found


def _wait_gone(work: Path, seconds: float = 5.0) -> list[str]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        left = host_processes(work)
        if not left:
            return []
        time.sleep(0.1)
    return host_processes(work)


def _run_until_sleeping(target, job, work: Path, store=None, act=None):
    """Run in a thread; call ``act()`` once the slow function sleeps on the host."""
    outcome: dict = {}
    cancel = threading.Event()
    sleeping = work / "src" / "jobs.py.sleeping"  # the synced copy's marker

    def body():
        try:
            outcome["result"] = runner.profile(job, target, None, cancel, store=store)
        except Exception as exc:  # noqa: BLE001 - the test inspects it
            outcome["error"] = exc

    thread = threading.Thread(target=body)
    thread.start()
    deadline = time.monotonic() + 120
    while not sleeping.exists():
        assert time.monotonic() < deadline and thread.is_alive(), (
            f"the slow function never started: {outcome}"
        )
        time.sleep(0.05)
    started = time.monotonic()
    act(cancel)
    thread.join(60)
    assert not thread.is_alive()
    outcome["stop_s"] = time.monotonic() - started
    return outcome


def test_cancel_stops_the_remote_group_and_keeps_stored_results(sshd, ssh_control_dir, ws, tmp_path):
    work = tmp_path / "work"
    target = _target(sshd, work)
    store = RunStore(ws)
    [earlier] = runner.profile(
        make_job(ws / "jobs.py", functions=["quick"], protocol=FAST), target, store=store
    )
    saved = {p.name: p.read_bytes() for p in store.runs.iterdir()}

    job = make_job(ws / "jobs.py", functions=["slow"], protocol=FAST)
    # after a result the harness gets a second for its teardown, then is killed
    assert _wait_gone(work, 5.0) == []
    outcome = _run_until_sleeping(target, job, work, store, act=lambda cancel: cancel.set())
    assert isinstance(outcome.get("error"), Cancelled), outcome
    assert outcome["stop_s"] < SLEEP_S  # stopped, not waited out
    assert _wait_gone(work, 8.0) == []  # gone (how fast is a timing: loaded hosts vary)
    assert {p.name: p.read_bytes() for p in store.runs.iterdir()} == saved
    assert store.get(earlier.run_id).run_id == earlier.run_id


def test_cli_timeout_stops_the_remote_group(sshd, ssh_control_dir, ws, tmp_path):
    work = tmp_path / "work"
    started = time.monotonic()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "trainium_lens",
            "profile",
            str(ws / "jobs.py"),
            "slow",
            "--host",
            "lens-test",
            "--ssh-config",
            str(sshd.config),
            "--remote-python",
            sys.executable,
            "--work-dir",
            str(work),
            "--timeout",
            "10",
            "--warmup",
            "0",
            "--active",
            "1",
            "--wait",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == TimedOut.exit_code, proc.stderr
    assert "timed out" in proc.stderr.strip().splitlines()[-1]
    assert time.monotonic() - started < SLEEP_S  # stopped by the timeout, not waited out
    assert _wait_gone(work, 8.0) == []  # gone (how fast is a timing: loaded hosts vary)
    assert not (ws / ".trainium-lens" / "runs").exists() or not list(
        (ws / ".trainium-lens" / "runs").iterdir()
    )


def test_dropped_connection_then_next_run_works(sshd, ssh_control_dir, ws, tmp_path):
    work = tmp_path / "work"
    target = _target(sshd, work)
    job = make_job(ws / "jobs.py", functions=["slow"], protocol=FAST)
    try:
        outcome = _run_until_sleeping(target, job, work, act=lambda _cancel: sshd.kill_all())
    finally:
        if sshd.proc is None:
            sshd.start()
    error = outcome.get("error")
    assert isinstance(error, TargetError), outcome
    assert "lost the SSH connection" in str(error) and "\n" not in str(error)
    # the wrapper on the host notices the dead channel and kills the harness group
    assert _wait_gone(work, 5.0) == []
    [result] = runner.profile(make_job(ws / "jobs.py", functions=["quick"], protocol=FAST), target)
    assert result.function.name == "quick"


def test_a_dropped_connection_to_a_reachable_host_is_said_as_such(sshd, ssh_control_dir, ws, tmp_path):
    """The connection drops mid-run but the host still answers: the message says the
    connection was lost (not ssh's bare "exit status 255"), and the next run works."""
    work = tmp_path / "work"
    target = _target(sshd, work)
    job = make_job(ws / "jobs.py", functions=["slow"], protocol=FAST)
    outcome = _run_until_sleeping(target, job, work, act=lambda _cancel: sshd.drop_connections())
    error = outcome.get("error")
    assert isinstance(error, TargetError), outcome
    text = str(error)
    assert "lost the SSH connection during the run" in text and "\n" not in text, text
    assert "exit status 255" not in text.split("(", 1)[0], text
    assert _wait_gone(work, 5.0) == []
    [result] = runner.profile(make_job(ws / "jobs.py", functions=["quick"], protocol=FAST), target)
    assert result.function.name == "quick"


def test_busy_work_dir_queues_then_runs_or_refuses(sshd, ssh_control_dir, ws, tmp_path):
    work = tmp_path / "work"
    job = make_job(ws / "jobs.py", functions=["quick"], protocol=FAST)
    _target(sshd, work).prepare(ws)  # creates the work dir
    # Stand-in for another run: hold the same flock a run holds on the host.
    holder = os.open(work / "lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(holder, fcntl.LOCK_EX)
    try:
        events: list[dict] = []
        with pytest.raises(TargetError) as info:
            _target(sshd, work, lock_wait_s=1).run(job, events.append)
        assert "busy" in str(info.value) and "\n" not in str(info.value)
        assert any(e.get("stage") == "queue" for e in events)

        events.clear()
        queued = threading.Event()

        def on_event(event):
            events.append(event)
            if event.get("stage") == "queue":
                queued.set()

        outcome: dict = {}
        thread = threading.Thread(
            target=lambda: outcome.update(batch=_target(sshd, work, lock_wait_s=60).run(job, on_event))
        )
        thread.start()
        assert queued.wait(60)
    finally:
        fcntl.flock(holder, fcntl.LOCK_UN)
        os.close(holder)
    thread.join(120)
    assert outcome["batch"]["results"][0]["function"]["name"] == "quick"

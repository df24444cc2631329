"""The warm worker (harness/runtime/worker.py + targets/warm/slot.py) at the target level: the
real fork server, the real torch.profiler, real crashes.

One module-scoped local target holds one worker for most tests (each job after
the first is warm), which also shows that a worker survives what a job did.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, PYTHON
from tests.support.ranks_cases import alive
from trainium_lens.engine.runner import profile
from trainium_lens.errors import Cancelled, HarnessError, TargetError, TimedOut
from trainium_lens.model.job import make_job
from trainium_lens.targets.local import LocalTarget
from trainium_lens.targets.warm.slot import WarmSlot

STATE = '''
import torch

SEEN = []


def make_inputs():
    return (torch.ones(8, 8),)


# trainium: profile inputs=make_inputs wait=0 warmup=0 active=1
def leave_a_mess(x):
    """Changes everything a job can change in torch and in its own module."""
    SEEN.append(1)
    torch.manual_seed(1234)
    torch.set_default_dtype(torch.float64)
    torch.set_grad_enabled(False)
    torch.use_deterministic_algorithms(True)
    return x + 1


# trainium: profile inputs=make_inputs wait=0 warmup=0 active=1
def report_state(x):
    """Writes what it finds next to the file (the job's first call only)."""
    import json, os
    out = os.path.join(os.path.dirname(__file__), "state.json")
    if not os.path.exists(out):
        with open(out, "w") as fh:
            json.dump({"seen": len(SEEN), "dtype": str(torch.get_default_dtype()),
                       "grad": torch.is_grad_enabled(),
                       "deterministic": torch.are_deterministic_algorithms_enabled(),
                       "rand": torch.rand(1).item()}, fh)
    return x + 1
'''

SLEEP_S = 60  # how long FAULTS' sleeps() sleeps
FAULTS = '''
import ctypes
import os
import time

import torch


def make_inputs():
    return (torch.ones(4),)


# trainium: profile inputs=make_inputs wait=0 warmup=0 active=1
def exits(x):
    os._exit(3)


# trainium: profile inputs=make_inputs wait=0 warmup=0 active=1
def segfaults(x):
    ctypes.string_at(0)


# trainium: profile inputs=make_inputs wait=0 warmup=0 active=1
def oom_killed(x):
    """A stand-in for the kernel's OOM killer (what it does: SIGKILL the process);
    a real out-of-memory kill cannot be provoked safely on a shared machine."""
    import signal
    os.kill(os.getpid(), signal.SIGKILL)


# trainium: profile inputs=make_inputs wait=0 warmup=0 active=1
def sleeps(x):
    time.sleep(60)
    return x
'''


@pytest.fixture(scope="module")
def ws(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("warm-ws")
    (root / "rmsnorm.py").write_text((EXAMPLES / "rmsnorm.py").read_text())
    (root / "state_mod.py").write_text(STATE)
    (root / "faults.py").write_text(FAULTS)
    return root


@pytest.fixture(scope="module")
def warm(tmp_path_factory):
    cache = tmp_path_factory.mktemp("warm-cache")
    old = os.environ.get("TRAINIUM_LENS_CACHE")
    os.environ["TRAINIUM_LENS_CACHE"] = str(cache)
    changes: list[dict] = []
    target = LocalTarget(python=PYTHON)
    target.warm = WarmSlot("local", 300, changes.append)
    target.changes = changes  # type: ignore[attr-defined]
    yield target
    target.close()
    if old is None:
        os.environ.pop("TRAINIUM_LENS_CACHE", None)
    else:
        os.environ["TRAINIUM_LENS_CACHE"] = old


#: The fewest steps a job may measure: what these tests assert is where a job ran and how it
#: ended, never its figures (a warm job: ~0.3 s of CPU, not ~0.7 s with the default protocol)
QUICK = {"wait": 0, "warmup": 0, "active": 1, "timing_calls": 1}


def run(target, ws: Path, file: str, function: str, **kw):
    job = make_job(ws / file, functions=[function], workspace=ws, protocol=QUICK)
    return profile(job, target, **kw)


def worker_pid(target) -> int:
    held = target.warm.held()
    assert held is not None
    return held["pid"]


def test_second_job_reuses_the_worker(warm, ws):
    # How much faster that is: bench/warm_bench.py, side by side with cold runs.
    (first,) = run(warm, ws, "rmsnorm.py", "rms_norm_naive")
    pid = worker_pid(warm)
    (second,) = run(warm, ws, "rmsnorm.py", "rms_norm_naive")
    assert worker_pid(warm) == pid
    assert {s.line for s in first.lines} == {s.line for s in second.lines}
    assert warm.changes[0]["state"] == "warm" and warm.changes[0]["pid"] == pid


def test_every_job_starts_from_fresh_module_and_torch_state(warm, ws):
    (ws / "state.json").unlink(missing_ok=True)
    run(warm, ws, "state_mod.py", "report_state")
    import json

    fresh = json.loads((ws / "state.json").read_text())
    (ws / "state.json").unlink()
    run(warm, ws, "state_mod.py", "leave_a_mess")
    run(warm, ws, "state_mod.py", "report_state")
    after = json.loads((ws / "state.json").read_text())
    assert after == fresh
    assert fresh["seen"] == 0 and fresh["dtype"] == "torch.float32" and fresh["grad"] is True
    assert fresh["deterministic"] is False


def test_an_edited_file_is_imported_anew(warm, ws):
    helper = ws / "scale_helper.py"
    helper.write_text("def scale(x):\n    return x * 2\n")
    (ws / "uses_helper.py").write_text(
        "import torch\nfrom scale_helper import scale\n\n\ndef make_inputs():\n"
        "    return (torch.ones(16),)\n\n\n# trainium: profile inputs=make_inputs\n"
        "def f(x):\n    return scale(x) + 1\n"
    )
    (before,) = run(warm, ws, "uses_helper.py", "f")
    helper.write_text("import torch\n\n\ndef scale(x):\n    return torch.exp(x)\n")
    (after,) = run(warm, ws, "uses_helper.py", "f")
    ops_before = {op.name for s in before.lines for op in s.ops}
    ops_after = {op.name for s in after.lines for op in s.ops}
    assert "aten::mul" in ops_before and "aten::exp" not in ops_before
    assert "aten::exp" in ops_after and "aten::mul" not in ops_after


def cold_error(ws: Path, function: str) -> str:
    with pytest.raises(TargetError) as err:
        run(LocalTarget(python=PYTHON), ws, "faults.py", function)
    return str(err.value)


@pytest.mark.parametrize(
    "function, words",
    [
        ("exits", "exit status 3"),
        ("segfaults", "killed by SIGSEGV"),
        ("oom_killed", "killed by SIGKILL (out of memory?)"),
    ],
)
def test_a_crashing_job_gives_the_cold_error_and_the_next_job_runs(warm, ws, function, words):
    run(warm, ws, "rmsnorm.py", "rms_norm_naive")
    pid = worker_pid(warm)
    with pytest.raises(TargetError) as err:
        run(warm, ws, "faults.py", function)
    assert str(err.value).startswith("the harness ended without a result: " + words), err.value
    assert str(err.value).split(";")[0] == cold_error(ws, function).split(";")[0]
    (result,) = run(warm, ws, "rmsnorm.py", "rms_norm_naive")
    assert result.lines
    assert worker_pid(warm) == pid  # the fork server never ran the job: it stays warm


def job_children(worker: int) -> list[int]:
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1]) == worker:
                found.append(int(proc.name))
        except (OSError, ValueError):
            continue
    return found


def cancel_at(stage: str) -> tuple[threading.Event, list[dict], Callable[[dict], None]]:
    """A cancel event that the job's ``stage`` event sets, the events seen, and the
    on_event callback that records them."""
    cancel = threading.Event()
    events: list[dict] = []

    def on_event(event: dict) -> None:
        events.append(event)
        if event.get("stage") == stage:
            cancel.set()

    return cancel, events, on_event


def test_cancel_and_timeout_stop_the_job_not_the_worker(warm, ws):
    run(warm, ws, "rmsnorm.py", "rms_norm_naive")
    pid = worker_pid(warm)
    cancel, _, on_event = cancel_at("compile")
    with pytest.raises(Cancelled):
        run(warm, ws, "faults.py", "sleeps", on_event=on_event, cancel=cancel)
    assert not job_children(pid)
    start = time.monotonic()
    with pytest.raises(TimedOut):
        run(warm, ws, "faults.py", "sleeps", timeout=3)
    assert time.monotonic() - start < SLEEP_S  # stopped, not waited out
    assert not job_children(pid)
    assert worker_pid(warm) == pid
    (result,) = run(warm, ws, "rmsnorm.py", "rms_norm_naive")
    assert result.lines


def test_a_worker_that_died_between_jobs_is_replaced_silently(warm, ws):
    run(warm, ws, "rmsnorm.py", "rms_norm_naive")
    pid = worker_pid(warm)
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    events: list[dict] = []
    (result,) = run(warm, ws, "rmsnorm.py", "rms_norm_naive", on_event=events.append)
    assert result.lines and worker_pid(warm) != pid
    assert not [e for e in events if e.get("event") in ("error", "warning")]


def test_a_user_error_is_the_cold_error(warm, ws):
    (ws / "raises.py").write_text(
        "def make_inputs():\n    return (1,)\n\n\n# trainium: profile inputs=make_inputs\n"
        "def f(x):\n    raise ValueError('nope')\n"
    )
    with pytest.raises(HarnessError) as hot:
        run(warm, ws, "raises.py", "f")
    with pytest.raises(HarnessError) as cold:
        run(LocalTarget(python=PYTHON), ws, "raises.py", "f")
    assert (hot.value.kind, str(hot.value), hot.value.line) == (
        cold.value.kind,
        str(cold.value),
        cold.value.line,
    )


def test_the_idle_timeout_ends_the_worker(tmp_path, ws, monkeypatch):
    monkeypatch.setenv("TRAINIUM_LENS_CACHE", str(tmp_path))
    changes: list[dict] = []
    target = LocalTarget(python=PYTHON)
    target.warm = slot = WarmSlot("local", 1.5, changes.append)
    try:
        run(target, ws, "rmsnorm.py", "rms_norm_naive")
        pid = worker_pid(target)
        deadline = time.monotonic() + 30
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not alive(pid)
        deadline = time.monotonic() + 5
        while changes[-1]["state"] != "none" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [c["state"] for c in changes] == ["warm", "none"]
        assert slot.held() is None
    finally:
        target.close()


def test_zero_idle_seconds_means_cold_runs(tmp_path, ws, monkeypatch):
    monkeypatch.setenv("TRAINIUM_LENS_CACHE", str(tmp_path))
    target = LocalTarget(python=PYTHON)
    target.warm = slot = WarmSlot("local", 0)
    (result,) = run(target, ws, "rmsnorm.py", "rms_norm_naive")
    assert result.lines and slot.held() is None and slot.worker is None


def test_a_job_waits_for_the_hosts_lock_and_can_be_cancelled_while_waiting(warm, ws, tmp_path):
    """The SSH target passes the work dir's lock (held by the worker per job, as the
    cold wrapper holds it per run); here the local worker takes it the same way."""
    import fcntl

    from trainium_lens.targets.local import read_json_file
    from trainium_lens.targets.warm.worker import Launch

    run(warm, ws, "rmsnorm.py", "rms_norm_naive")
    worker = warm.warm.worker
    assert worker is not None
    launch = worker.launch  # the same worker
    lock = tmp_path / "lock"
    holder = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(holder, fcntl.LOCK_EX)
    job = make_job(ws / "rmsnorm.py", functions=["rms_norm_naive"], workspace=ws, protocol=QUICK)
    spec = job.to_spec(str(ws), str(tmp_path / "run"), "local")
    cancel, events, on_event = cancel_at("queue")
    with pytest.raises(Cancelled):
        warm.warm.run(
            Launch(launch.argv, launch.key, launch.env),
            spec,
            on_event,
            cancel,
            60,
            read_result=read_json_file,
            lock=str(lock),
        )
    assert [e["stage"] for e in events if e.get("event") == "stage"] == ["queue"]
    assert warm.warm.worker is worker and worker.alive()
    fcntl.flock(holder, fcntl.LOCK_UN)
    os.close(holder)
    document = warm.warm.run(
        Launch(launch.argv, launch.key, launch.env),
        spec,
        None,
        None,
        60,
        read_result=read_json_file,
        lock=str(lock),
    )
    assert document["results"] and warm.warm.worker is worker


# Last: it releases the module's worker.
def test_doctor_reports_a_held_worker_until_it_is_released(warm, ws):
    from trainium_lens.hosttools.doctor.report import Report
    from trainium_lens.hosttools.doctor.run import _warm_worker_check

    run(warm, ws, "rmsnorm.py", "rms_norm_naive")
    pid = worker_pid(warm)
    report = Report(host="local")
    _warm_worker_check(report, "local")
    check = report.get("warm_worker")
    assert check is not None and check.status == "warn" and f"pid {pid} " in check.detail
    assert "Release Warm Worker" in (check.fix or "")
    assert warm.warm.close() is True and not alive(pid)
    report = Report(host="local")
    _warm_worker_check(report, "local")
    check = report.get("warm_worker")
    # another session's worker on this machine may still be listed; ours is gone
    assert check is not None and (check.status == "pass" or f"pid {pid} " not in check.detail)

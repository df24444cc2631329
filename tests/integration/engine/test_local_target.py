"""The local target and runner, driving the real harness (real torch, CPU).

Cancel and timeout must stop the harness's whole process group — including a
child the user's code started — and leave earlier stored results untouched.
"""

from __future__ import annotations

import os
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import workspace
from tests.support.ranks_cases import alive
from trainium_lens.engine import runner
from trainium_lens.errors import Cancelled, TargetError, TimedOut
from trainium_lens.model.job import make_job
from trainium_lens.model.result import load
from trainium_lens.model.store import RunStore
from trainium_lens.targets.local import LocalTarget

# A marked function that starts a child process (recording its pid) and then
# blocks: the run can only end by being stopped.
HANGS = textwrap.dedent("""
    import subprocess, sys, time, torch

    def make_inputs():
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
        with open(__file__ + ".child", "w") as f:
            f.write(str(child.pid))
        with open(__file__ + ".harness", "w") as f:
            import os
            f.write(str(os.getpid()))
        return (torch.ones(4),)

    # trainium: profile inputs=make_inputs
    def hangs(x):
        time.sleep(300)
        return x * 2
""")

QUICK = textwrap.dedent("""
    import torch

    # trainium: profile wait=0 warmup=1 active=2 timing_calls=3
    def quick():
        x = torch.ones(64)
        return x * 2 + 1
""")

DIES = textwrap.dedent("""
    import os, sys, torch

    # trainium: profile
    def dies():
        sys.stderr.write("native library says: fatal\\n")
        sys.stderr.flush()
        os._exit(7)
""")


def _wait_for(path: Path, seconds: float = 60) -> int:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.exists() and path.read_text():
            return int(path.read_text())
        time.sleep(0.05)
    raise AssertionError(f"{path} never appeared")


def test_quick_run_stores_analysed_results(tmp_path, cache):
    ws = workspace(tmp_path, "quick.py", QUICK)
    events: list[dict] = []
    store = RunStore(ws)
    job = make_job(ws / "quick.py", workspace=ws)
    results = runner.profile(job, LocalTarget(), events.append, store=store)
    (res,) = results
    assert res.function.name == "quick" and res.host == "local" and res.backend == "cpu"
    assert res.totals.steps == 2 and res.function.protocol.active == 2
    stages = [e["stage"] for e in events if e["event"] == "stage"]
    assert stages[0] == "import" and stages[-1] == "done" and "profile" in stages
    assert events[-1]["event"] == "result"
    # The run dir is under the cache, named for the workspace and the batch.
    run_dir = Path(res.artifacts.run_dir)
    assert cache in run_dir.parents and run_dir.name == job.batch_id
    assert (run_dir / "batch.json").is_file()
    # Stored, analysed (the x * 2 + 1 line dispatches two ops).
    stored = load(ws / ".trainium-lens" / "runs" / f"{res.run_id}.json")
    assert stored == res
    assert res.line("quick.py", 7).calls == 2
    # Artifacts are already local: fetch copies them where asked.
    assert res.artifacts.trace
    copy = LocalTarget().fetch(res.artifacts.trace, tmp_path / "fetched" / "trace.json", workspace=ws)
    assert copy.read_bytes() == Path(res.artifacts.trace).read_bytes()
    with pytest.raises(TargetError, match="no such artifact"):
        LocalTarget().fetch(str(run_dir / "nothing"), tmp_path / "x", workspace=ws)
    with pytest.raises(TargetError, match="not in a run folder"):  # only a run's own artifacts
        LocalTarget().fetch(str(ws), tmp_path / "y", workspace=ws)
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()
    # A fetch never replaces what is there (the destination may come from a stored result).
    copy.write_text("mine")
    with pytest.raises(TargetError, match="already exists: not replaced"):
        LocalTarget().fetch(res.artifacts.trace, copy, workspace=ws)
    assert copy.read_text() == "mine"


class GroupWatcher(threading.Thread):
    """Records the process group of the harness this test process starts
    (found in /proc: a child of ours running trainium_lens.harness). A harness
    of an earlier run may still be tearing torch down (the target hands the
    result back before that ends): those already there are not it."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.pgid: int | None = None
        self.done = threading.Event()
        self.before = {pid for pid, *_ in _processes()}

    def run(self) -> None:
        me = os.getpid()
        while not self.done.is_set() and self.pgid is None:
            for pid, ppid, pgid, cmd in _processes():
                if ppid == me and "trainium_lens.harness" in cmd and pid not in self.before:
                    self.pgid = pgid
            time.sleep(0.02)


def _processes():
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if fields[0] != "Z":  # zombies are dead (this container's init may not reap)
            yield int(entry), int(fields[1]), int(fields[2]), cmd


def _group_members(pgid: int) -> list[str]:
    return [cmd for pid, _ppid, group, cmd in _processes() if group == pgid]


def test_cancel_kills_the_process_group(tmp_path, cache):
    ws = workspace(tmp_path, "hangs.py", HANGS)
    store = RunStore(ws)
    earlier = load_earlier(store)
    job = make_job(ws / "hangs.py", workspace=ws)
    cancel = threading.Event()
    pids: dict[str, int] = {}

    def cancel_when_started():
        pids["child"] = _wait_for(ws / "hangs.py.child")
        pids["harness"] = _wait_for(ws / "hangs.py.harness")
        cancel.set()

    groups = GroupWatcher()
    groups.start()
    threading.Thread(target=cancel_when_started, daemon=True).start()
    with pytest.raises(Cancelled):
        runner.profile(job, LocalTarget(), None, cancel=cancel, store=store)
    groups.done.set()
    assert not alive(pids["harness"]), "the harness survived"
    assert not alive(pids["child"]), "the user's child process survived"
    assert groups.pgid == pids["harness"] and _group_members(groups.pgid) == []
    # The store holds exactly what it held before.
    assert [r.run_id for r in store.load_all()] == [earlier]


SLEEP_S = 300  # the user's import blocks this long


def test_timeout_kills_the_process_group(tmp_path, cache):
    # Blocks while the harness imports the user's file; the timeout does not
    # care which stage the run is in.
    ws = workspace(
        tmp_path,
        "slow_import.py",
        f"import time\ntime.sleep({SLEEP_S})\n\n# trainium: profile\ndef f():\n    pass\n",
    )
    store = RunStore(ws)
    earlier = load_earlier(store)
    job = make_job(ws / "slow_import.py", workspace=ws)
    groups = GroupWatcher()
    groups.start()
    started = time.monotonic()
    with pytest.raises(TimedOut, match="timed out after 4 s"):
        runner.profile(job, LocalTarget(), None, timeout=4, store=store)
    elapsed = time.monotonic() - started
    groups.done.set()
    # Ended by the timeout: not before it, and not by waiting out the user's sleep.
    assert 4 <= elapsed < SLEEP_S
    assert groups.pgid is not None and _group_members(groups.pgid) == []
    assert [r.run_id for r in store.load_all()] == [earlier]


def load_earlier(store: RunStore) -> str:
    from tests.unit.model.test_result import minimal
    from trainium_lens.model.result import Result

    res = Result.from_dict(minimal(run_id="earlier-0"))
    store.save(res)
    return res.run_id


def test_harness_that_dies_gives_its_last_stderr_line(tmp_path, cache):
    ws = workspace(tmp_path, "dies.py", DIES)
    job = make_job(ws / "dies.py", workspace=ws)
    with pytest.raises(TargetError, match="ended without a result: native library says: fatal"):
        runner.profile(job, LocalTarget(), store=RunStore(ws))
    assert not (ws / ".trainium-lens").exists()


def test_missing_python_is_clear(tmp_path, cache):
    ws = workspace(tmp_path, "quick.py", QUICK)
    job = make_job(ws / "quick.py", workspace=ws)
    with pytest.raises(TargetError, match="python not found: /no/such/python"):
        LocalTarget(python="/no/such/python").run(job, lambda e: None)
    with pytest.raises(TargetError, match="not on PATH"):
        LocalTarget(python="no-such-python-3.99").run(job, lambda e: None)


def test_default_python_is_this_interpreter():
    assert LocalTarget().python == sys.executable
    assert os.path.isfile(LocalTarget()._python_path())


def test_reason_for_an_early_end():
    from types import SimpleNamespace
    from typing import Any

    from trainium_lens.targets.stream import StderrTail, _why

    def exited(code: int) -> Any:  # the one field _why reads of a Popen
        return SimpleNamespace(returncode=code)

    tail = StderrTail(max_lines=3)
    assert _why(exited(3), tail) == "exit status 3"
    for n in range(5):
        tail.add(f"line {n}\n")
    tail.add("   \n")
    assert tail.text() == "line 3\nline 4\n   "  # bounded
    assert _why(exited(1), tail) == "line 4"
    assert _why(exited(-9), tail) == ("killed by SIGKILL (out of memory?); last output: line 4")

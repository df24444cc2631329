"""The job's own processes told apart from outside load (harness/runtime/outside.py), with
real processes: two busy Pythons carrying the job's marker (sibling ranks), one without it
in a session of its own (another user's job), and the measuring process a third child of
this test, as a rank is a child of its launcher. No timing is asserted: which pids are
counted where, and that the siblings' CPU lands in the job's share, not the outside one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from trainium_lens.harness.runtime import outside

SPIN = "import time\nend = time.time() + 30\nwhile time.time() < end:\n    pass\n"
# the measuring "rank": its window over 1.5 s, printed as JSON
MEASURE = """
import json, os, sys, time
from trainium_lens.harness.runtime.outside import Outside, job_pids, snapshot
o = Outside().start()
time.sleep(1.5)
out = o.stop(1.5)
out["job"] = sorted(job_pids(snapshot(), os.getpid(), o.markers))
print(json.dumps(out))
"""

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs Linux /proc")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("TRAINIUM_LENS_RUN", "SLURM_JOB_ID")}
    return {**env, **extra}


@pytest.fixture
def procs():
    started: list[subprocess.Popen] = []
    yield started
    for p in started:
        p.kill()
        p.wait()


def test_siblings_with_the_job_marker_are_the_job_and_an_unmarked_spinner_is_outside(procs, tmp_path):
    marker = {"TRAINIUM_LENS_RUN": str(tmp_path / "run-spec.json")}
    for _ in range(2):
        procs.append(subprocess.Popen([sys.executable, "-c", SPIN], env=_env(**marker)))
    procs.append(subprocess.Popen([sys.executable, "-c", SPIN], env=_env(), start_new_session=True))
    sib_a, sib_b, stranger = (p.pid for p in procs)
    time.sleep(0.3)  # the spinners are running
    measured = subprocess.run(
        [sys.executable, "-c", MEASURE], env=_env(**marker), capture_output=True, text=True, timeout=60
    )
    assert measured.returncode == 0, measured.stderr
    out = json.loads(measured.stdout)
    job = set(out["job"])
    assert {sib_a, sib_b} <= job, out  # the marked siblings are the job's
    assert os.getpid() in job  # the launcher (this test) waits on the rank: the job's
    assert stranger not in job, out
    # the siblings spun for the whole window: their CPU is in the job's share (some of it:
    # the machine is shared); the stranger's is not
    assert out["job_s"] > 0.05, out
    assert out["cpus"] >= 1


def test_a_marker_the_process_does_not_share_is_not_the_job():
    """SLURM's job and step, torchrun's run id with its master: every named variable must match."""
    mine = outside.own_markers({"SLURM_JOB_ID": "12", "SLURM_STEP_ID": "0", "TORCHELASTIC_RUN_ID": "none"})
    assert mine == [(("SLURM_JOB_ID", "12"), ("SLURM_STEP_ID", "0"))]  # torchrun's needs its master too
    procs = {1: outside.Proc(0, 0, 0, "init"), 10: outside.Proc(1, 0, 0, "a"), 11: outside.Proc(1, 0, 0, "b")}
    envs = {
        10: {"SLURM_JOB_ID": "12", "SLURM_STEP_ID": "0"},
        11: {"SLURM_JOB_ID": "12", "SLURM_STEP_ID": "1"},
    }
    assert outside.job_pids(procs, 99, mine, environ=envs.get) == {10}


def test_ancestors_and_descendants_are_the_job_unrelated_processes_are_not():
    """A rank's launcher chain (agent, owner, CLI) and its own children (DataLoader workers)."""
    procs = {
        1: outside.Proc(0, 0, 0, "init"),
        4: outside.Proc(1, 0, 0, "shell"),
        5: outside.Proc(4, 0, 0, "cli"),
        6: outside.Proc(5, 0, 0, "agent"),
        7: outside.Proc(6, 0, 0, "rank0"),
        8: outside.Proc(7, 0, 0, "worker"),
        9: outside.Proc(1, 0, 0, "other"),
        10: outside.Proc(9, 0, 0, "its child"),
    }
    # no marker: the parent started this process, the ancestors above it are not the job
    assert outside.job_pids(procs, 7, [], environ=lambda pid: None) == {6, 8}
    # the agent carries the job's marker: the launcher that started it (the CLI) is the job's too
    marker = [(("TRAINIUM_LENS_RUN", "/r/spec.json"),)]
    envs = {6: {"TRAINIUM_LENS_RUN": "/r/spec.json"}}
    assert outside.job_pids(procs, 7, marker, environ=envs.get) == {5, 6, 8}

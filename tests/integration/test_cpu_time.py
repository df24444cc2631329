"""tests.support.cpu_time (scripts/test.sh's CPU per test file): a test's line holds
the CPU of the processes it waited for, and the summary adds them up per file."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.conftest import ROOT

BURN = """
import subprocess, sys

def test_child_burns_half_a_second():
    code = "import time\\nwhile time.process_time() < 0.5: pass"
    subprocess.run([sys.executable, "-c", code], check=True)

def test_nothing():
    pass
"""


def test_a_test_carries_its_childrens_cpu_and_the_summary_adds_per_file(tmp_path):
    (tmp_path / "test_burn.py").write_text(BURN)
    log = tmp_path / "cpu.jsonl"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}  # not one of ours
    env.update(TEST_CPU_LOG=str(log), PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "tests.support.cpu_time",
            "--rootdir",
            str(tmp_path),
            str(tmp_path / "test_burn.py"),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = {json.loads(t)["test"].rsplit("::", 1)[-1]: json.loads(t) for t in log.read_text().splitlines()}
    assert set(lines) == {"test_child_burns_half_a_second", "test_nothing"}
    burn, idle = lines["test_child_burns_half_a_second"], lines["test_nothing"]
    assert burn["cpu_s"] >= 0.5  # the child's own CPU, counted when it was reaped
    assert idle["cpu_s"] < burn["cpu_s"] and idle["worker"] == "main"
    summary = subprocess.run(
        [sys.executable, "-m", "tests.support.cpu_time", str(log), "--top", "1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert len(summary) == 2 and summary[1].endswith("test_burn.py")
    assert float(summary[1].split()[0]) >= 0.5

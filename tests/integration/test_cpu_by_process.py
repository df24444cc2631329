"""scripts/cpu-by-process.py (CONTRIBUTING, "CI"): a process a test started is counted
to that test's file, one without a test by its command name; what ran before the
command is not counted; the command's exit status is the script's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

SCRIPT = ROOT / "scripts" / "cpu-by-process.py"
# a second of CPU in a child that carries a test's name, then a second in one that does not
BURN = "import time\nt = time.process_time()\nwhile time.process_time() - t < 1.0: pass\n"
COMMAND = f"""
import os, subprocess, sys
env = dict(os.environ, PYTEST_CURRENT_TEST="tests/x/test_burn.py::test_one (call)")
subprocess.run([sys.executable, "-c", {BURN!r}], env=env, check=True)
env.pop("PYTEST_CURRENT_TEST")
subprocess.run([sys.executable, "-c", {BURN!r}], env=env, check=True)
sys.exit(3)
"""


def test_cpu_is_counted_to_the_test_that_started_it(tmp_path: Path) -> None:
    out = tmp_path / "cpu.json"
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--json", str(out), "--", sys.executable, "-c", COMMAND],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 3, done.stderr  # the command's own status
    doc = json.loads(out.read_text())
    assert doc["cpu_s"]["tests/x/test_burn.py"] > 0
    assert "tests/x/test_burn.py" in done.stdout
    burned = doc["commands"]["tests/x/test_burn.py"]
    assert all(command.startswith(sys.executable) for command in burned)
    # the second child and the command itself carry no test: counted by their name
    assert any(key.startswith("~python") for key in doc["cpu_s"])
    # a whole run counts only what ran during it: never more CPU than 2 seconds' worth
    # per core beyond the wall (a baseline counted would add this machine's uptime)
    assert sum(doc["cpu_s"].values()) <= (os.cpu_count() or 1) * (doc["wall_s"] + 2)

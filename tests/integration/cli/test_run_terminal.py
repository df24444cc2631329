"""What the user sees on the terminal under ``trainium-lens run`` is the script's
(docs/scripts.md, "Training frameworks" and the paragraph above it): the same
script run plainly and under ``run --no-store`` prints the same stdout lines
(the per-line table follows them), and its stderr holds nothing more than the
tool's own progress lines — no kineto ``USDT:… profiler_start`` lines — save the
one allocator line torch itself prints during the memory step (documented in
docs/scripts.md, "The window")."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.integration.cli.test_run import lens_run, project

#: the CLI's progress lines and its own notes (``cli/commands/run.py``: ``Progress``)
_TOOLS = re.compile(r"^  (trainium-lens|warning): ")
#: torch's allocator, once, while allocations are recorded (c10's log, not silenceable alone)
_TORCHS = re.compile(r"^\[W\d+ [\d:.]+ CPUAllocator\.cpp:\d+\] Memory block of unknown size")


def test_the_scripts_output_is_the_same_with_and_without_run(tmp_path: Path) -> None:
    ws = project(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "KINETO_LOG_LEVEL"}
    plain = subprocess.run(
        [sys.executable, "scheduled.py"], cwd=ws, env=env, capture_output=True, text=True, timeout=120
    )
    assert plain.returncode == 0, plain.stderr
    proc, _ = lens_run(
        ws, tmp_path, "--no-store", "--", "python", "scheduled.py", env={"KINETO_LOG_LEVEL": ""}
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    script_lines = plain.stdout.splitlines()
    assert len(script_lines) == 14
    out = proc.stdout.splitlines()
    assert out[: len(script_lines)] == script_lines  # the script's lines, unchanged and first
    assert not any(line.startswith("step ") for line in out[len(script_lines) :])
    err = proc.stderr.splitlines()
    assert any(_TOOLS.match(line) for line in err)  # progress was shown
    assert not any("USDT:" in line or "profiler_start" in line for line in err)
    extra = [line for line in err if not _TOOLS.match(line) and not _TORCHS.match(line)]
    assert extra == plain.stderr.splitlines()  # nothing else but what the script itself wrote

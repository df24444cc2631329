"""A full disk under the run's files: one line that says so (not "[Errno 28]"),
exit 4 (the host cannot run it), and no temporary file left on the full disk.

The disk is real: a tmpfs of two pages mounted over the cache folder (root only,
as on the development and CI machines)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

SMALL = """import torch


def make_inputs():
    return (torch.randn(32, 32),)


# trainium: profile inputs=make_inputs wait=0 warmup=0 active=1 timing_calls=1
def small(x):
    return (x @ x).relu()
"""


@pytest.fixture
def full_disk(tmp_path: Path):
    mount = tmp_path / "full"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8k", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"needs root to mount a small tmpfs: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_disk_is_said_as_such_and_leaves_no_temporary_file(tmp_path: Path, full_disk: Path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "small.py").write_text(SMALL)
    proc = subprocess.run(
        [sys.executable, "-m", "trainium_lens", "profile", str(ws / "small.py"), "--workspace", str(ws)],
        env={
            **os.environ,
            "PYTHONPATH": str(ROOT / "server"),
            "TRAINIUM_LENS_CACHE": str(full_disk / "cache"),
        },
        capture_output=True,
        text=True,
        timeout=300,
    )
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("trainium-lens:")]
    assert proc.returncode == 4, proc.stderr[-2000:]
    assert len(errors) == 1 and "no space left on the disk" in errors[0], proc.stderr[-2000:]
    assert "Errno" not in errors[0] and "free some space" in errors[0]
    left = [str(p.relative_to(full_disk)) for p in full_disk.rglob("*") if p.is_file()]
    assert left == [], left  # no half-written result, no temporary file
    assert not (ws / ".trainium-lens" / "runs").exists() or not list(
        (ws / ".trainium-lens" / "runs").iterdir()
    )

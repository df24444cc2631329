"""``fix`` of a run made on an SSH host (a real sshd on loopback): without ``--host``
it refuses with one line naming the host (a stored host never sends the workspace
anywhere by itself); with ``--host`` the copies and the driver under
``.trainium-lens/fixes/`` are shipped with the job, measured there, and the file is
written here with ``--apply`` when the fix held (a host too busy to tell is "not
measurable", exit 1, nothing written). No assertion on a timing."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.integration.cli.test_cli import cli, error_line
from tests.integration.cli.test_fix import FILE

pytestmark = pytest.mark.ssh


def test_fix_of_a_host_run_is_measured_there_and_applied_here(sshd, ssh_control_dir, tmp_path: Path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "model.py").write_text(FILE)
    work = tmp_path / "work"
    host = ["--host", "lens-test", "--ssh-config", str(sshd.config)]
    host += ["--remote-python", sys.executable, "--work-dir", str(work)]
    env = {"TRAINIUM_LENS_CACHE": str(tmp_path / "cache")}
    proc = cli("profile", str(ws / "model.py"), *host, "--workspace", str(ws), env=env)
    assert proc.returncode == 0, proc.stderr

    refused = cli("fix", str(ws / "model.py"), "infer", "--workspace", str(ws), env=env)
    line = error_line(refused)
    assert "measured on lens-test" in line and "--host lens-test" in line

    out = tmp_path / "fix.json"
    proc = cli(
        "fix",
        str(ws / "model.py"),
        "infer",
        *host,
        "--apply",
        "--json",
        str(out),
        "--workspace",
        str(ws),
        env=env,
    )
    assert proc.returncode in (0, 1), proc.stderr  # 1: not measurable on that host now
    (row,) = json.loads(out.read_text())
    assert proc.returncode == (1 if row["verdict"] == "not measurable" else 0)
    assert "not measured" not in row["text"], row["text"]
    assert row["before_us"] and row["after_us"] and row["outputs_equal"] is True  # measured there
    assert row["applied"] == row["held"]
    assert ((ws / "model.py").read_text() != FILE) == row["held"]  # written here, only if it held
    if row["held"]:
        assert "rms_norm" in (ws / "model.py").read_text()
    assert not list((ws / ".trainium-lens" / "fixes").iterdir())  # the copies are gone here

"""``run`` beside the user's own ``sitecustomize`` (ours, first on ``PYTHONPATH``,
chains to it): one that raises is reported as Python reports it and the script is
still profiled; one that imports torch before the harness arms is profiled too."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.conftest import ROOT
from tests.integration.cli.test_run import lens_run, project


def run_with_site(tmp_path: Path, site_source: str):
    ws = project(tmp_path)
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(site_source)
    out = tmp_path / "out.json"
    proc, _ = lens_run(
        ws,
        tmp_path,
        "--steps",
        "2:2",
        "--json",
        str(out),
        "--",
        "python",
        "tinylm/train.py",
        "--steps",
        "6",
        env={"PYTHONPATH": f"{ROOT / 'server'}{os.pathsep}{site}"},
    )
    return proc, out


def profiled_lines(out: Path) -> list[dict]:
    doc = json.loads(out.read_text())
    return [ln for ln in doc["lines"] if ln["file"].endswith("model.py") and ln["self_time_us"] > 0]


def test_a_raising_user_sitecustomize_is_reported_as_python_does_and_the_script_profiled(tmp_path):
    proc, out = run_with_site(tmp_path, "raise RuntimeError('the user site broke')\n")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Error in sitecustomize; set PYTHONVERBOSE for traceback:\nRuntimeError: the user site broke" in (
        proc.stderr
    )
    assert profiled_lines(out)


def test_a_user_sitecustomize_importing_torch_is_profiled(tmp_path):
    proc, out = run_with_site(tmp_path, "import torch\n")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert profiled_lines(out)

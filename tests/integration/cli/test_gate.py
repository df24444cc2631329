"""Run history and the regression gate end to end: the real CLI, the real harness
and torch profiler on CPU, a real git repository.

Two versions of one file: the second does one extra matmul on one line.
``check`` of the second against the first's baseline exits 1 naming that line;
the first against its own baseline exits 0. This machine
may be busy (other processes on its cores): the gate's own re-measurement and
its control (docs/ci.md, "How the gate judges") are what keep these stable.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from junitparser import Failure, JUnitXml

from tests.integration.cli.test_cli import SERVER, cli

V1 = """import torch


def make_inputs():
    torch.manual_seed(0)
    x = torch.randn(256, 512)
    w1 = torch.randn(512, 512) / 23
    w2 = torch.randn(512, 512) / 23
    w3 = torch.randn(512, 512) / 23
    return x, w1, w2, w3


# trainium: profile inputs=make_inputs
def block(x, w1, w2, w3):
    h = torch.relu(x @ w1)
    h = h @ w2
    h = torch.tanh(h)
    return h.sum()
"""
V2 = V1.replace("    h = h @ w2\n", "    h = h @ w2 @ w3\n")
CHANGED = 16  # the line V2 changes


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(root), "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> dict:
    return {"TRAINIUM_LENS_CACHE": str(tmp_path_factory.mktemp("cache")), "GITHUB_ACTIONS": ""}


@pytest.fixture(scope="module")
def repo(tmp_path_factory, env) -> Path:
    """A git repository with V1 committed and its baseline recorded (20 steps) in perf/."""
    root = tmp_path_factory.mktemp("repo")
    git(root, "init", "-q", "-b", "main")
    (root / "block.py").write_text(V1)
    git(root, "add", "block.py")
    git(root, "commit", "-qm", "v1")
    proc = cli("profile", "block.py", "--active", "20", "--json", "perf/baseline.json", cwd=root, env=env)
    assert proc.returncode == 0, proc.stderr
    return root


@pytest.mark.serial  # counts the steps measured: a loaded machine's extra steps change it
def test_runs_list_their_commits_and_show_latest_works(repo, env):
    head = git(repo, "rev-parse", "HEAD")
    stored = json.loads((repo / "perf" / "baseline.json").read_text())
    assert stored["git"] == {"commit": head, "dirty": False, "branch": "main"}
    assert len(stored["totals"]["step_us"]) == 20 and all(len(ln["step_us"]) == 20 for ln in stored["lines"])
    runs = cli("runs", cwd=repo, env=env)
    assert runs.returncode == 0, runs.stderr
    header, row = runs.stdout.splitlines()[:2]
    assert header.split() == ["when", "(UTC)", "function", "backend@host", "step", "commit", "run"]
    assert "block.py::block" in row and "cpu@local" in row and head[:7] in row and stored["run_id"] in row
    assert cli("runs", "block.py", "block", cwd=repo, env=env).stdout.count(head[:7]) == 1
    latest = cli("show", "latest", cwd=repo, env=env)
    assert latest.returncode == 0 and latest.stdout.startswith("block  block.py:14"), latest.stderr
    assert cli("show", "latest", "block.py", "block", cwd=repo, env=env).stdout == latest.stdout
    listing = cli("show", cwd=repo, env=env)  # no run named: what there is, not an argparse error
    assert listing.returncode == 0 and stored["run_id"] in listing.stdout and "show latest" in listing.stdout
    missing = cli("show", "latest~5", cwd=repo, env=env)
    assert missing.returncode == 2 and "has 1 stored run (latest~0 is the oldest)" in missing.stderr


def test_one_extra_matmul_fails_naming_the_line(repo, env, tmp_path):
    (repo / "block.py").write_text(V2)
    junit = tmp_path / "lens.xml"
    github = {**env, "GITHUB_ACTIONS": "true", "GITHUB_WORKSPACE": str(repo)}
    try:
        proc = cli(
            "check", "block.py", "--baseline", "perf/baseline.json", "--junit", str(junit),
            cwd=repo, env=github, timeout=600,
        )  # fmt: skip
    finally:
        (repo / "block.py").write_text(V1)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    row = next(ln for ln in proc.stdout.splitlines() if ln.lstrip().startswith(f"{CHANGED}  "))
    assert "h = h @ w2 @ w3" in row and "REGRESSED" in row and "→" in row
    assert f"line {CHANGED}" in proc.stdout.splitlines()[-1]
    assert any(
        ln.startswith(f"::error file=block.py,line={CHANGED},title=Trainium Lens%3A block line slower")
        for ln in proc.stdout.splitlines()
    ), proc.stdout
    (suite,) = list(JUnitXml.fromfile(str(junit)))
    failed = [c.name for c in suite if any(isinstance(r, Failure) for r in c.result)]
    assert f"{CHANGED}  h = h @ w2 @ w3" in failed
    newest = cli("show", "latest", cwd=repo, env=env)
    assert "h = h @ w2 @ w3" in newest.stdout  # the check's own run is in the history
    assert "+dirty" in cli("runs", "--limit", "1", cwd=repo, env=env).stdout


def test_a_baseline_from_another_backend_is_refused(repo, env, tmp_path):
    doc = json.loads((repo / "perf" / "baseline.json").read_text())
    doc.update(backend="cuda", clock="cuda")
    (tmp_path / "cuda.json").write_text(json.dumps(doc))
    # refused once this run's backend is known, after it ran: two steps are enough to be refused
    proc = cli(
        "check", "block.py", "--baseline", str(tmp_path / "cuda.json"), "--no-store",
        "--active", "2", "--timing-calls", "1", "--confirm", "0", cwd=repo, env=env,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "measured on backend cuda (clock cuda), this run on cpu" in proc.stderr.splitlines()[-1]
    early = cli(
        "check", "block.py", "--baseline", str(tmp_path / "cuda.json"), "--backend", "cpu", cwd=repo, env=env
    )
    assert early.returncode == 2 and "[import]" not in early.stderr  # refused before profiling


def test_the_same_code_passes_against_its_committed_baseline_in_another_clone(repo, env, tmp_path):
    """The same code passes against its own baseline, never a regression; and the baseline
    file travels with the repository: another clone elsewhere (as on a CI runner of the
    same kind) checks against it, options from pyproject.toml. (One check for both: each
    is a gate run of up to three measurements, ~10 s of CPU.)"""
    doc = json.loads((repo / "perf" / "baseline.json").read_text())
    doc["host"] = "dev-laptop"  # recorded on another machine of the same kind
    (repo / "perf" / "baseline.json").write_text(json.dumps(doc))
    (repo / "pyproject.toml").write_text(
        '[tool.trainium-lens]\nbaseline = "perf/baseline.json"\n'
        'max-regression = "10%"\njunit = "out/lens.xml"\n'
    )
    git(repo, "add", "perf/baseline.json", "pyproject.toml")
    git(repo, "commit", "-qm", "baseline")
    clone = tmp_path / "ci-checkout"
    git(tmp_path, "clone", "-q", str(repo), str(clone))
    proc = cli("check", "block.py", "--no-store", cwd=clone, env=env, timeout=600)
    assert proc.returncode == 0 and "REGRESSED" not in proc.stdout, proc.stdout + proc.stderr
    assert "PASS: no regression beyond +10% and the noise" in proc.stdout
    assert "note: baseline from host dev-laptop, this run on local" in proc.stdout
    assert (clone / "out" / "lens.xml").is_file()


@pytest.mark.parametrize("command", [["show", "latest"], ["runs"], ["compare", "latest", "latest"], ["show"]])
def test_a_closed_pipe_ends_quietly(repo, env, command):
    """The reader goes away before the command writes (``| head`` on a long table,
    ``| true``): exit 0, nothing on stderr — no BrokenPipeError traceback."""
    read, write = os.pipe()
    os.close(read)  # nobody will read: every write is EPIPE
    environ = {**os.environ, "PYTHONPATH": str(SERVER), "PYTHONIOENCODING": "utf-8", **env}
    proc = subprocess.run(
        [sys.executable, "-m", "trainium_lens", *command],
        cwd=repo, env=environ, stdout=write, stderr=subprocess.PIPE, text=True, timeout=120,
    )  # fmt: skip
    os.close(write)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr and proc.stderr == ""


def test_show_piped_to_true_exits_zero(repo, env):
    shell = shutil.which("bash")
    assert shell
    environ = {**os.environ, "PYTHONPATH": str(SERVER), **env}
    proc = subprocess.run(
        [shell, "-o", "pipefail", "-c", f"{sys.executable} -m trainium_lens show latest | true"],
        cwd=repo, env=environ, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr

"""A crafted repository: what a repository can commit under ``.trainium-lens/``
(symlinked store folders, results naming files outside run folders, store
entries that are devices or FIFOs, results dated 9999) and what the real CLI
does with it. After each, nothing outside the workspace has changed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from trainium_lens.model.job import workspace_id

SCHEMA1 = ROOT / "tests" / "data" / "schema1_result.json"


def lens(*args: str, cache: Path, timeout: float = 60) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "server"), "TRAINIUM_LENS_CACHE": str(cache)}
    return subprocess.run(
        [sys.executable, "-m", "trainium_lens", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def snapshot(folder: Path) -> dict[str, bytes | str]:
    out: dict[str, bytes | str] = {}
    for path in sorted(folder.rglob("*")):
        key = str(path.relative_to(folder))
        if path.is_symlink():
            out[key] = "-> " + os.readlink(path)
        elif path.is_file():
            out[key] = path.read_bytes()
    return out


def commit_result(ws: Path, run_id: str, **fields) -> dict:
    data = json.loads(SCHEMA1.read_text())
    data.update(run_id=run_id, batch_id=run_id.rsplit("-", 1)[0], **fields)
    runs = ws / ".trainium-lens" / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    (runs / f"{run_id}.json").write_text(json.dumps(data))
    return data


@pytest.fixture
def repo(tmp_path: Path) -> dict[str, Path]:
    ws = tmp_path / "ws"
    ws.mkdir()
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "id_ed25519").write_text("secret key\n")
    cache = tmp_path / "cache"
    return {"ws": ws, "victim": victim, "cache": cache, "tmp": tmp_path}


def real_run_folder(cache: Path, ws: Path, batch: str) -> Path:
    folder = cache / workspace_id(ws) / "runs" / batch
    folder.mkdir(parents=True)
    (folder / "x.trace.json").write_text('{"traceEvents": []}')
    return folder


RUN = "20261129-101500-abcd-0"


@pytest.mark.parametrize("link", ["artifacts", "store"])
def test_fetch_never_writes_through_a_committed_symlink(repo, link):
    """Before: `.trainium-lens/artifacts -> ~/somewhere` made `fetch` copy the run
    folder into ~/somewhere/<batch>."""
    ws, victim, cache = repo["ws"], repo["victim"], repo["cache"]
    folder = real_run_folder(cache, ws, RUN.rsplit("-", 1)[0])
    data = commit_result(
        ws,
        RUN,
        artifacts={"location": "local", "run_dir": str(folder), "trace": str(folder / "x.trace.json")},
    )
    assert data
    if link == "artifacts":
        (ws / ".trainium-lens" / "artifacts").symlink_to(victim)
    else:  # the whole store is a link: its runs are read through it, nothing is written
        store = repo["tmp"] / "elsewhere"
        (ws / ".trainium-lens").rename(store)
        (store / "artifacts").symlink_to(victim)
        (ws / ".trainium-lens").symlink_to(store)
    proc = lens("fetch", RUN, "--workspace", str(ws), cache=cache)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "leads outside" in proc.stderr, proc.stderr
    assert snapshot(victim) == {"id_ed25519": b"secret key\n"}


def test_fetch_copies_only_a_run_folder_of_this_workspace(repo):
    """A result naming a folder that looks like a run folder but is not in this
    workspace's cache (`/anywhere/<workspace id>/runs/<batch>`) copies nothing."""
    ws, victim, cache = repo["ws"], repo["victim"], repo["cache"]
    fake = repo["tmp"] / "planted" / workspace_id(ws) / "runs" / "b"
    fake.mkdir(parents=True)
    (fake / "id_ed25519").symlink_to(victim / "id_ed25519")
    (fake / "copy").write_text("x")
    commit_result(ws, RUN, artifacts={"location": "local", "run_dir": str(fake), "trace": None})
    proc = lens("fetch", RUN, "--workspace", str(ws), cache=cache)
    assert proc.returncode == 4, proc.stderr
    assert "not in a run folder of this workspace" in proc.stderr and proc.stderr.count("\n") == 1
    assert not (ws / ".trainium-lens" / "artifacts" / "b").exists()


def test_the_store_always_writes_its_own_ignore_file(repo):
    """An empty committed `.trainium-lens/.gitignore` left fetched copies one
    `git add -A` from a push."""
    ws, cache = repo["ws"], repo["cache"]
    folder = real_run_folder(cache, ws, RUN.rsplit("-", 1)[0])
    commit_result(
        ws,
        RUN,
        artifacts={"location": "local", "run_dir": str(folder), "trace": str(folder / "x.trace.json")},
    )
    (ws / ".trainium-lens" / ".gitignore").write_text("")
    proc = lens("fetch", RUN, "--workspace", str(ws), cache=cache)
    assert proc.returncode == 0, proc.stderr
    assert (ws / ".trainium-lens" / ".gitignore").read_text() == "*\n"
    assert (ws / ".trainium-lens" / "artifacts" / folder.name / "x.trace.json").is_file()
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    status = subprocess.run(
        ["git", "-C", str(ws), "status", "--porcelain", "--untracked-files=all"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert ".trainium-lens" not in status.stdout


@pytest.mark.parametrize(
    "where, value",
    [
        ("totals", "NaN"),
        ("totals", "Infinity"),
        ("totals", "-Infinity"),
        ("totals", "1e308"),
        ("totals", "-5.0"),
        ("line", "NaN"),
        ("line", "-3"),
    ],
)
def test_a_number_no_figure_can_be_is_a_damaged_file_not_a_traceback(repo, where, value):
    """Python's JSON parser reads NaN and Infinity; 1e308 overflows what a figure is
    multiplied by; a negative time or count is no measurement: each makes the file
    damaged (skipped, named once), and the other runs still show."""
    ws, cache = repo["ws"], repo["cache"]
    commit_result(ws, RUN)
    bad = RUN[:-1] + "1"
    data = commit_result(ws, bad)
    if where == "totals":
        data["totals"]["self_time_us"] = "@"
    else:
        data["lines"][0]["calls"] = "@"
    path = ws / ".trainium-lens" / "runs" / f"{bad}.json"
    path.write_text(json.dumps(data).replace('"@"', value))
    runs = lens("runs", "--workspace", str(ws), cache=cache)
    assert runs.returncode == 0 and "Traceback" not in runs.stderr, runs.stderr
    assert RUN in runs.stdout and bad not in runs.stdout
    assert f"{bad}.json" in runs.stderr  # named, with why
    show = lens("show", bad, "--workspace", str(ws), cache=cache)
    assert show.returncode == 2 and "Traceback" not in show.stderr, show.stderr
    assert len(show.stderr.strip().splitlines()) <= 2  # the skipped file named, then one error line
    assert lens("show", RUN, "--workspace", str(ws), cache=cache).returncode == 0


def test_a_stored_replacement_the_builder_would_not_write_is_never_run_or_applied(repo):
    """A committed result's edit is source text: measured, it runs (here at import,
    where it would create a file); applied, it lands in the user's file. ``fix``
    re-derives the edit from the file as it is and refuses one that differs."""
    from trainium_lens.analysis.fixes.optimizer import optimizer_edit

    ws, cache, tmp = repo["ws"], repo["cache"], repo["tmp"]
    src = (
        "import torch\n\nmodel = torch.nn.Linear(4, 4)\n"
        "opt = torch.optim.AdamW(model.parameters(), lr=1e-3)\n\n\n"
        "def make():\n    return (torch.randn(2, 4),)\n\n\n"
        "# trainium: profile inputs=make\ndef rms_norm_naive(x):\n    return model(x)\n"
    )
    (ws / "examples").mkdir()
    (ws / "examples" / "rmsnorm.py").write_text(src)
    edit = optimizer_edit(src, "examples/rmsnorm.py", "AdamW", "fused=True", "rms_norm_naive")
    assert edit is not None
    pwned = tmp / "PWNED"
    crafted = {
        **edit.__dict__,
        "replacement": f"lr=__import__('pathlib').Path({str(pwned)!r}).touch() or 1e-3",
    }
    finding = {"kind": "optimizer_choice", "severity": "info", "file": "examples/rmsnorm.py", "line": 4}
    finding.update(message="m", fix="AdamW(..., fused=True)", edit=crafted)
    commit_result(ws, RUN, findings=[finding])
    proc = lens(
        "fix",
        str(ws / "examples" / "rmsnorm.py"),
        "--apply",
        "--workspace",
        str(ws),
        cache=cache,
        timeout=300,
    )
    assert proc.returncode == 2, proc.stderr
    assert "not the edit Trainium Lens builds" in proc.stderr.strip().splitlines()[-1]
    assert not pwned.exists() and (ws / "examples" / "rmsnorm.py").read_text() == src

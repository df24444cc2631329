"""Profiling over SSH against a real sshd on loopback (the "host" is this machine,
its work dir a temp folder): the same attribution as a local run, sibling
imports, hostile names, and each failure as one clear line from the CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from trainium_lens.cli import main
from trainium_lens.engine import runner
from trainium_lens.model.job import make_job
from trainium_lens.model.store import RunStore
from trainium_lens.targets.local import LocalTarget
from trainium_lens.targets.ssh.target import SshTarget

pytestmark = pytest.mark.ssh

FAST = {"wait": 0, "warmup": 1, "active": 2, "timing_calls": 2}

SIBLING_MAIN = """\
import torch
from helper import scale


def make_inputs():
    return (torch.ones(64, 64),)


# trainium: profile inputs=make_inputs
def scaled(x):
    y = scale(x)
    return y.sum()
"""
SIBLING_HELPER = "def scale(x):\n    return x * 3\n"


def _target(sshd, work: Path, **kw) -> SshTarget:
    return SshTarget(
        "lens-test", ssh_config=str(sshd.config), remote_python=sys.executable, work_dir=str(work), **kw
    )


def _attribution(batch: dict) -> dict:
    """Per function: {line: sorted (op, calls)} — what must match across targets."""
    out = {}
    for result in batch["results"]:
        out[result["function"]["name"]] = {
            stat["line"]: sorted((op["name"], op["calls"]) for op in stat["ops"]) for stat in result["lines"]
        }
    return out


def test_rmsnorm_over_ssh_matches_a_local_run(sshd, ssh_control_dir, tmp_path):
    job = make_job(
        ROOT / "examples" / "rmsnorm.py",
        functions=["rms_norm_naive"],
        workspace=ROOT / "examples",
        protocol=FAST,
    )
    events: list[dict] = []
    remote = _target(sshd, tmp_path / "work").run(job, events.append, timeout=300)
    local_job = make_job(
        ROOT / "examples" / "rmsnorm.py",
        functions=["rms_norm_naive"],
        workspace=ROOT / "examples",
        protocol=FAST,
    )
    local = LocalTarget().run(local_job, lambda e: None, timeout=300)
    assert _attribution(remote) == _attribution(local)
    assert _attribution(remote)["rms_norm_naive"], "no lines attributed"
    result = remote["results"][0]
    assert result["host"] == "lens-test"
    assert result["artifacts"]["location"] == "lens-test"
    assert result["artifacts"]["run_dir"].startswith(str((tmp_path / "work").resolve()))
    stages = [e.get("stage") for e in events if e.get("event") == "stage"]
    assert stages[:2] == ["connect", "sync"] and "profile" in stages
    assert not any(e.get("event") in ("heartbeat", "remote_process", "batch") for e in events)


def test_sibling_module_and_hostile_names(sshd, ssh_control_dir, tmp_path):
    ws = tmp_path / "my ws 'q' \"dq\" $(touch pwned) ünï✓"
    (ws / "sub dir").mkdir(parents=True)
    main_py = ws / "sub dir" / "prof $(touch pwned) 'x' ✓.py"
    main_py.write_text(SIBLING_MAIN)
    (ws / "sub dir" / "helper.py").write_text(SIBLING_HELPER)
    work = tmp_path / "remote $(touch pwned) work"
    job = make_job(main_py, workspace=ws, protocol=FAST)
    store = RunStore(ws)
    [result] = runner.profile(job, _target(sshd, work), store=store)
    assert result.function.name == "scaled"
    assert result.function.file == "sub dir/prof $(touch pwned) 'x' ✓.py"
    ops = {op.name for stat in result.lines for op in stat.ops}
    assert "aten::mul" in ops  # scale() in the sibling module ran, attributed to its call
    assert (work / "src" / "sub dir" / "helper.py").is_file()

    # the artifacts stayed on the host; `fetch` brings them here
    assert result.artifacts.location == "lens-test" and result.artifacts.trace
    remote_trace = Path(result.artifacts.trace)
    assert remote_trace.is_file()
    dest = tmp_path / "fetched $(touch pwned) 'here'"
    assert (
        main(
            [
                "fetch",
                result.run_id[:-2],
                "--workspace",
                str(ws),
                "--ssh-config",
                str(sshd.config),
                "--dest",
                str(dest),
                "--work-dir",
                str(work),
            ]
        )
        == 0
    )
    local = dest / job.batch_id / remote_trace.relative_to(result.artifacts.run_dir)
    assert local.read_bytes() == remote_trace.read_bytes()
    # Fetched once: a second fetch keeps that copy (a fetch never replaces a folder).
    local.write_bytes(b"kept")
    fetch_again = ["fetch", result.run_id, "--workspace", str(ws), "--ssh-config", str(sshd.config)]
    fetch_again += ["--work-dir", str(work)]
    assert main([*fetch_again, "--dest", str(dest)]) == 0
    assert local.read_bytes() == b"kept"
    for place in (tmp_path, sshd.home, Path.cwd()):
        assert not list(Path(place).rglob("pwned")), place


def _cli(*args: str) -> tuple[int, str]:
    proc = subprocess.run(
        [sys.executable, "-m", "trainium_lens", *args], capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    return proc.returncode, proc.stderr


@pytest.mark.parametrize(
    "alias, words",
    [
        ("lens-badauth", "authentication failed"),
        ("lens-unknown", "host key not known"),
        ("lens-changed", "host key has CHANGED"),
        ("lens-refused", "connection refused"),
    ],
)
def test_cli_connection_failures_are_one_line(sshd, ssh_control_dir, tmp_path, alias, words):
    code, err = _cli(
        "profile", "examples/rmsnorm.py", "--host", alias, "--ssh-config", str(sshd.config), "--no-store"
    )
    lines = [
        ln
        for ln in err.splitlines()
        if ln.startswith("trainium-lens: ") and not ln.startswith("trainium-lens: connect")
    ]
    assert code != 0
    assert len(lines) == 1 and words in lines[0], err


def test_cli_remote_python_missing_and_torch_missing(sshd, ssh_control_dir, tmp_path):
    base = [
        "profile",
        "examples/rmsnorm.py",
        "rms_norm_naive",
        "--host",
        "lens-test",
        "--ssh-config",
        str(sshd.config),
        "--work-dir",
        str(tmp_path / "w"),
        "--no-store",
    ]
    code, err = _cli(*base, "--remote-python", "/opt/nothing/bin/python")
    assert code != 0 and "the remote Python /opt/nothing/bin/python does not exist" in err
    code, err = _cli(*base, "--remote-python", "/usr/bin/python3")  # no torch there
    assert code == 4  # torch missing: the host cannot run it
    last = err.strip().splitlines()[-1]
    assert "torch" in last.lower() and last.startswith("trainium-lens: "), err

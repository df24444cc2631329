"""The command line's one exit-code contract, over every command, as a user
meets it: 0 ok, 1 only for a regression (``check``), 2 usage (an unknown
function, no marker, a file that does not parse, a missing baseline, bad
options, an output path that cannot be written), 3 the user's code failed, 4 the
host or backend cannot run it. Each failure is one line on stderr. Every
command's ``--help`` states the contract (README's table says the same)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from trainium_lens.cli import COMMANDS, EXIT_CODES

SOURCE = """\
import torch


def make():
    return (torch.ones(8),)


# trainium: profile inputs=make wait=0 warmup=0 active=2 timing_calls=1
def good(x):
    return x * 2


# trainium: profile inputs=make wait=0 warmup=0 active=1 timing_calls=1
def raises(x):
    raise ValueError("user bug")
"""


def lens(*args: str, cwd: Path, tmp: Path, extra: dict | None = None) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT / "server"),
        "TRAINIUM_LENS_CACHE": str(tmp / "cache"),
        "OMP_NUM_THREADS": "1",
    }
    env.pop("GITHUB_ACTIONS", None)
    env.update(extra or {})
    return subprocess.run(
        [sys.executable, "-m", "trainium_lens", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture(scope="module")
def ws(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("codes")
    (root / "ws").mkdir()
    ws = root / "ws"
    (ws / "mod.py").write_text(SOURCE)
    (ws / "nomarker.py").write_text("def f():\n    return 1\n")
    (ws / "broken.py").write_text("# trainium: profile\ndef f(:\n")
    (ws / "out").mkdir()
    (ws / "out" / "keep").write_text("mine\n")
    return ws


def test_every_command_states_the_contract_in_its_help(ws, tmp_path):
    for command in [c.__name__.rsplit(".", 1)[1] for c in COMMANDS]:
        proc = lens(command, "--help", cwd=ws, tmp=tmp_path)
        assert proc.returncode == 0 and EXIT_CODES in proc.stdout, command
    readme = (ROOT / "README.md").read_text()
    for code in ("`0`", "`1`", "`2`", "`3`", "`4`", "`124`", "`130`"):
        assert code in readme


CASES = [
    # (what, args, exit code, what stderr's one line says)
    ("ok", ["profile", "mod.py", "good", "--json", "base.json"], 0, None),
    ("a misspelled function", ["profile", "mod.py", "godo"], 2, "is not a marked function"),
    ("no marker", ["profile", "nomarker.py"], 2, "has no function marked"),
    ("a file that does not parse", ["profile", "broken.py"], 2, "does not parse"),
    ("a missing file", ["profile", "missing.py"], 2, None),
    ("bad options", ["profile", "mod.py", "good", "--timeout", "-5"], 2, "--timeout"),
    ("an unknown option", ["profile", "mod.py", "--no-such-option"], 2, None),
    ("the user's code failed", ["profile", "mod.py", "raises", "--no-store"], 3, "ValueError"),
    (
        "an unavailable backend",
        ["profile", "mod.py", "good", "--backend", "neuron", "--no-store"],
        4,
        "neuron",
    ),
    (
        "--json naming a folder",
        ["profile", "mod.py", "good", "--no-store", "--json", "out"],
        2,
        "is a folder",
    ),
    ("a missing baseline", ["check", "mod.py", "good", "--baseline", "missing.json"], 2, "missing.json"),
    (
        "check --timeout -5",
        ["check", "mod.py", "good", "--baseline", "base.json", "--timeout", "-5"],
        2,
        None,
    ),
    (
        "check --active past its bound",
        ["check", "mod.py", "good", "--baseline", "base.json", "--active", "100000000"],
        2,
        "--active must be at most 1000",
    ),
    ("profile --active past its bound", ["profile", "mod.py", "good", "--active", "5000"], 2, "at most 1000"),
    ("an unknown run", ["show", "20990101-nope"], 2, "no stored run"),
    ("a missing result file", ["show", "missing.json"], 2, None),
    ("compare an unknown run", ["compare", "nope-1", "nope-2"], 2, None),
    ("fetch an unknown run", ["fetch", "nope"], 2, "no stored run"),
    ("export an unknown run", ["export", "nope"], 2, "no stored run"),
    ("runs", ["runs"], 0, None),
    ("doctor off a Neuron host", ["doctor"], 0, None),
]


@pytest.mark.parametrize("what, args, code, says", CASES, ids=[c[0] for c in CASES])
def test_one_exit_code_contract(ws, tmp_path, what, args, code, says):
    where = [] if args[0] == "doctor" else ["--workspace", str(ws)]
    proc = lens(*args, *where, cwd=ws, tmp=tmp_path)
    assert proc.returncode == code, (what, proc.stdout, proc.stderr)
    if args[0] == "doctor":  # fine for what it can do: the Neuron checks say why they do not apply
        assert "FAIL" not in proc.stdout and "not a Trainium host" in proc.stdout, proc.stdout
    if code != 0:
        lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("trainium-lens:") or "error:" in ln]
        assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
        if says:
            assert says in lines[0], proc.stderr
    assert sorted(p.name for p in (ws / "out").iterdir()) == ["keep"]  # the folder intact


#: A check's options where its verdict is not what a test asserts: the marker's small
#: protocol (check's own defaults are 20 steps and 5 timing calls) and no re-measurement
#: (--confirm: up to 2 more runs on a noisy host, ~4 s of CPU each)
ONE_MEASUREMENT = ("--active", "2", "--timing-calls", "1", "--confirm", "0")


def test_check_prints_its_verdict_and_exits_2_when_it_cannot_write_its_files(ws, tmp_path):
    if not (ws / "base.json").exists():
        assert lens("profile", "mod.py", "good", "--json", "base.json", cwd=ws, tmp=tmp_path).returncode == 0
    json.loads((ws / "base.json").read_text())
    proc = lens(
        "check", "mod.py", "good", "--baseline", "base.json", "--junit", "out", "--workspace", str(ws),
        *ONE_MEASUREMENT, cwd=ws, tmp=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "good" in proc.stdout  # the verdict, printed before the file was tried
    assert proc.stderr.strip().splitlines()[-1].startswith("trainium-lens: --junit")
    assert sorted(p.name for p in (ws / "out").iterdir()) == ["keep"]


INJECTION = "\n::error file=evil.py,line=1::INJECTED\n::stop-commands::pwned\n"


def crafted_baseline(ws: Path, tmp_path: Path, name: str, edit) -> str:
    if not (ws / "base.json").exists():
        assert lens("profile", "mod.py", "good", "--json", "base.json", cwd=ws, tmp=tmp_path).returncode == 0
    data = json.loads((ws / "base.json").read_text())
    edit(data)
    (ws / name).write_text(json.dumps(data))
    return name


def test_a_baseline_with_newlines_in_its_strings_prints_no_workflow_command(ws, tmp_path):
    """Before: a baseline whose host held a newline and `::error ...` made `check`
    under GitHub Actions print a fake annotation and silence the real ones."""

    def edit(data: dict) -> None:
        data["host"] = f"box{INJECTION}\u202eevil"
        data["git"] = {"commit": f"abc{INJECTION}", "dirty": False, "branch": f"main{INJECTION}"}
        for line in data["lines"]:
            line["text"] = f"x = 1{INJECTION}\x1b[2J\x0c"

    name = crafted_baseline(ws, tmp_path, "injected.json", edit)
    args = ["check", "mod.py", "good", "--baseline", name, "--junit", "junit.xml", "--workspace", str(ws)]
    args += ONE_MEASUREMENT
    proc = lens(*args, cwd=ws, tmp=tmp_path, extra={"GITHUB_ACTIONS": "true"})
    assert proc.returncode in (0, 1, 2), proc.stderr
    lines = (proc.stdout + proc.stderr).splitlines()
    assert not [ln for ln in lines if "INJECTED" in ln and ln.startswith("::")], proc.stdout
    assert not [ln for ln in lines if ln.startswith("::stop-commands")], proc.stdout
    assert "\x1b" not in proc.stdout and "\u202e" not in proc.stdout
    if (ws / "junit.xml").exists():
        import xml.etree.ElementTree as ET

        ET.parse(ws / "junit.xml")  # well-formed: no character XML forbids


@pytest.mark.parametrize("value", [-5.0, float("nan"), float("inf")])
def test_a_baseline_with_negative_or_non_finite_samples_is_refused(ws, tmp_path, value):
    def edit(data: dict) -> None:
        data["totals"]["step_us"] = [value, 1.0]

    name = crafted_baseline(ws, tmp_path, "bad-samples.json", edit)
    proc = lens("check", "mod.py", "good", "--baseline", name, "--workspace", str(ws), cwd=ws, tmp=tmp_path)
    assert proc.returncode == 2, proc.stderr
    said = proc.stderr.strip().splitlines()[-1]
    assert "not a time" in said or "not a number a result can hold" in said, said


@pytest.mark.parametrize(
    "rebind, line",
    [
        ("def good(x):\n    return x - 1\n", 13),
        ("good = abs\n", 13),
    ],
)
def test_a_rebound_marked_name_is_refused(ws, tmp_path, rebind, line):
    """Before: a marked `def good` followed by an unmarked `def good` (or `good =
    other`) profiled the other function under the marked name and line."""
    (ws / "rebound.py").write_text(
        SOURCE.split("# trainium: profile inputs=make wait=0 warmup=0 active=1")[0] + rebind
    )
    proc = lens("profile", "rebound.py", "good", "--no-store", "--workspace", str(ws), cwd=ws, tmp=tmp_path)
    assert proc.returncode == 2, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert f"rebound.py:{line}: good is bound again after its marked def (line 9)" in last, last


def test_a_decorated_marked_function_is_the_one_run(ws, tmp_path):
    source = SOURCE.replace("def good(x):", "@functools.lru_cache(maxsize=None)\ndef good(x):").replace(
        "import torch", "import functools\n\nimport torch"
    )
    (ws / "decorated.py").write_text(source)
    proc = lens("profile", "decorated.py", "good", "--no-store", "--workspace", str(ws), cwd=ws, tmp=tmp_path)
    assert proc.returncode == 0, proc.stderr

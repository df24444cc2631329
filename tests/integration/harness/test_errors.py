"""Each bad input → one ``error`` event with the right kind and a clear message,
exit status 1, and no batch.json (nothing half-written)."""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import DATA
from tests.support.harness import SERVER, line_of, run_harness


def failing(tmp_path, file, **kw):
    run_dir = tmp_path / "run"
    code, events, stderr = run_harness(DATA, file, run_dir, **kw)
    assert code == 1, stderr[-2000:]
    errors = [e for e in events if e["event"] == "error"]
    assert len(errors) == 1 and events[-1] is errors[0], events
    assert not (run_dir / "batch.json").exists()
    assert not [e for e in events if e["event"] == "result"]
    error = errors[0]
    assert error["message"] and "\n" not in error["message"]
    return error


def test_file_that_does_not_parse(tmp_path):
    e = failing(tmp_path, "bad_syntax.py")
    assert e["kind"] == "parse" and e["file"] == "bad_syntax.py"
    assert e["line"] == line_of(DATA / "bad_syntax.py", "def broken(")
    assert "does not parse" in e["message"]


def test_no_marked_function(tmp_path):
    e = failing(tmp_path, "no_marker.py")
    assert e["kind"] == "no_marked_function" and "# trainium: profile" in e["message"]


def test_unknown_function_lists_the_marked_ones(tmp_path):
    e = failing(tmp_path, "raises.py", functions=["nope"])
    assert e["kind"] == "unknown_function"
    assert "'nope'" in e["message"] and "fails" in e["message"] and "needs_args" in e["message"]


def test_unknown_marker_option_points_at_the_marker(tmp_path):
    e = failing(tmp_path, "raises.py", functions=["bad_option"])
    assert e["kind"] == "parse" and "colour" in e["message"]
    assert e["line"] == line_of(DATA / "raises.py", "colour=blue")


def test_required_params_without_inputs(tmp_path):
    e = failing(tmp_path, "raises.py", functions=["needs_args"])
    assert e["kind"] == "inputs" and "inputs=" in e["message"] and "x, y" in e["message"]


@pytest.mark.parametrize(
    "function, words",
    [
        ("names_nothing", "missing_function"),
        ("wrong_inputs", "tuple"),
    ],
)
def test_bad_inputs_function(tmp_path, function, words):
    e = failing(tmp_path, "raises.py", functions=[function])
    assert e["kind"] == "inputs" and words in e["message"]


def test_inputs_function_raising_points_at_its_line(tmp_path):
    e = failing(tmp_path, "raises.py", functions=["inputs_raise"])
    assert e["kind"] == "inputs" and "no data" in e["message"]
    assert (e["file"], e["line"]) == ("raises.py", line_of(DATA / "raises.py", "INPUTS-RAISES"))


def test_function_raising_points_at_the_user_line(tmp_path):
    e = failing(tmp_path, "raises.py", functions=["fails"])
    assert e["kind"] == "user_code" and "RuntimeError" in e["message"]
    assert (e["file"], e["line"]) == ("raises.py", line_of(DATA / "raises.py", "RAISES-HERE"))
    assert "Traceback" in e["traceback"]


def test_torch_missing(tmp_path):
    # ``-S``: this interpreter without its site-packages, i.e. really without torch
    e = failing(tmp_path, "raises.py", functions=["fails"], extra_args=["-S"])
    assert e["kind"] == "torch_missing" and "torch" in e["message"]


@pytest.mark.parametrize("backend", ["neuron", "cuda"])
def test_forced_backend_that_is_unavailable(tmp_path, backend):
    e = failing(tmp_path, "raises.py", functions=["fails"], backend=backend)
    assert e["kind"] == "backend_unavailable" and backend in e["message"]


def test_bad_spec(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "trainium_lens.harness"],
        input="{not json",
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(SERVER)},
        timeout=60,
    )
    assert proc.returncode == 1
    (event,) = [json.loads(x) for x in proc.stdout.splitlines()]
    assert event["event"] == "error" and event["kind"] == "spec"


def _other_pythons() -> list[str]:
    """Interpreters of other versions here (3.10 is the floor a host may have): on
    PATH, or installed by pyenv; one per version, each checked to start."""
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    found: dict[str, str] = {}
    for minor in range(10, 15):
        if minor == sys.version_info.minor:
            continue
        candidates = [shutil.which(f"python3.{minor}"), *sorted(glob.glob(f"{pyenv}/3.{minor}.*/bin/python"))]
        for path in filter(None, candidates):
            started = subprocess.run([path, "-c", "import sys"], capture_output=True, timeout=60)
            if started.returncode == 0:  # (a pyenv shim of a version not selected fails)
                found[f"3.{minor}"] = path
                break
    return list(found.values())


@pytest.fixture(params=["this Python, no torch", *_other_pythons()])
def python_without_torch(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    """This interpreter in a venv of its own (no torch: on every machine), and each
    other version PATH has (none of them has torch)."""
    if request.param != "this Python, no torch":
        return request.param
    venv = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    return str(venv / "bin" / "python")


def test_harness_starts_on_other_pythons_and_reports_missing_torch(tmp_path, python_without_torch):
    python = python_without_torch
    e = failing(tmp_path, "raises.py", functions=["fails"], python=python)
    assert e["kind"] == "torch_missing" and python in e["message"]
    e = failing(tmp_path, "bad_syntax.py", python=python)  # the pre-torch path in full
    assert e["kind"] == "parse" and e["line"] == line_of(DATA / "bad_syntax.py", "def broken(")

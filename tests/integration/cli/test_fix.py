"""``trainium-lens fix`` end to end: the real CLI and harness on CPU, on
transformers' LlamaRMSNorm as it ships (code not written here): the fix is
measured against the code it replaces and the file is written only with
``--apply``, only if the fix held, and never once it changed since the run.
No assertion on a timing: whether the fix held on this shared host is printed,
the figures are checked in bench/fix_check.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.cli.test_cli import cli, error_line
from tests.unit.analysis.test_fix_edits import LLAMA
from trainium_lens.cli.commands.fix import write_held
from trainium_lens.engine.fixes import Measured
from trainium_lens.model.result import Edit
from trainium_lens.model.store import RunStore

FILE = (
    LLAMA
    # a form feed and a line separator (U+2028) in a string: no line ends at either
    # (Python's tokenizer), so the marker, the lines' text and the fix stay where they are
    + """
\x0c
norm = LlamaRMSNorm(512)  # "\u2028"


def make_tokens():
    return (torch.randn(8, 512),)


# trainium: profile inputs=make_tokens wait=0 warmup=1 active=2 timing_calls=10
def infer(x):
    with torch.no_grad():
        return norm(x)
"""
)


@pytest.fixture(scope="module")
def ws(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("fixws")
    (root / "model.py").write_text(FILE)
    env = {"TRAINIUM_LENS_CACHE": str(tmp_path_factory.mktemp("cache"))}
    proc = cli("profile", str(root / "model.py"), "--workspace", str(root), env=env)
    assert proc.returncode == 0, proc.stderr
    return root


def test_fix_measures_and_leaves_the_file_alone(ws):
    out = ws / "fix.json"
    proc = cli("fix", str(ws / "model.py"), "infer", "--workspace", str(ws), "--json", str(out))
    assert proc.returncode in (0, 1), proc.stderr  # 1: not measurable on this host now
    assert (ws / "model.py").read_text() == FILE  # measured, not written
    (row,) = json.loads(out.read_text())
    assert row["title"] == "torch.nn.functional.rms_norm" and row["line"] == 14 and row["applied"] is False
    assert row["outputs_equal"] is True and row["max_abs_diff"] is not None  # the same math
    assert (
        row["speedup"] and row["before_us"] and row["after_us"] and row["basis"] == "paired unprofiled wall"
    )
    assert row["speedup_low"] <= row["speedup"] <= row["speedup_high"] and row["pairs"] >= 20
    assert f"1. model.py:14 torch.nn.functional.rms_norm: {row['text']}" in proc.stdout
    # the whole replacement, each of its lines, before anything ran
    (stored,) = [f.edit for f in RunStore(ws).load_all()[-1].findings if f.edit]
    shown = proc.stdout.split("\n1. model.py:14")[0]
    assert "fix 1: torch.nn.functional.rms_norm replaces model.py line" in shown
    assert all(f"    {line}" in shown for line in stored.replacement.splitlines())
    assert row["held"] == (row["verdict"] == "faster")  # outputs equal: the verdict decides
    assert proc.returncode == (1 if row["verdict"] == "not measurable" else 0)
    assert not list((ws / ".trainium-lens" / "fixes").iterdir())  # the copies are gone


def test_a_file_edited_since_the_run_is_refused_with_one_line(ws):
    edited = FILE.replace("variance + self.variance_epsilon", "variance + 1e-5")
    (ws / "model.py").write_text(edited)
    try:
        proc = cli("fix", str(ws / "model.py"), "infer", "--apply", "--workspace", str(ws))
        assert "changed since the run" in error_line(proc)
        assert (ws / "model.py").read_text() == edited
    finally:
        (ws / "model.py").write_text(FILE)


def _measured(held: bool, n: int) -> Measured:
    return Measured(
        n=n, file="m.py", line=1, edit_line=1, title="t", backend="cpu", speedup=2.0 if held else 0.5,
        before_us=2.0, after_us=1.0, basis="unprofiled walls", outputs_equal=True, max_abs_diff=0.0,
        held=held, text="",
    )  # fmt: skip


def _edit(line: int, old: str, new: str) -> Edit:
    return Edit("m.py", line, 4, line, 4 + len(old), new, old, "t", "f")


def test_apply_writes_only_what_held_and_keeps_the_mode(tmp_path):
    src = "def f():\n    a = 1\n    b = 2\n"
    (tmp_path / "m.py").write_text(src)
    (tmp_path / "m.py").chmod(0o640)
    held, slower = _measured(True, 1), _measured(False, 2)
    write_held(tmp_path, [(held, _edit(2, "a = 1", "a = 10")), (slower, _edit(3, "b = 2", "b = 20"))])
    assert (tmp_path / "m.py").read_text() == "def f():\n    a = 10\n    b = 2\n"
    assert held.applied and not slower.applied
    assert (tmp_path / "m.py").stat().st_mode & 0o777 == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["m.py"]  # no temporary left


@pytest.mark.parametrize("value", ["-1", "0", "nan", "inf"])
def test_a_timeout_that_is_not_a_positive_number_is_refused(tmp_path, value):
    proc = cli("fix", "m.py", "--timeout", value, "--workspace", str(tmp_path))
    assert proc.returncode == 2 and "--timeout" in error_line(proc)

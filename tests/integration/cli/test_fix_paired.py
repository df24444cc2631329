"""``trainium-lens fix`` judged on paired ratios, end to end (real CLI, harness, CPU).

* the bundled example's RMSNorm edit, which times 1.02–1.04× on this CPU with an
  independent paired timer (bench/fix_bench.py): the JSON and the row carry the
  paired ratio with its 99 % interval, and it is never applied as faster;
* an RMSNorm whose every call also sleeps a random 0–2 ms: its ratios spread so
  far that one second of pairs (``--seconds 1``) allows no verdict (a 99 % interval
  about ±0.1 wide at ~100–500 pairs, against the ±0.05 a verdict needs), so the
  outcome is "not measurable on this host now": nothing applied, exit 1.

No timing asserted beyond that: the figures are the bench's (bench/fix_bench.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.integration.cli.test_cli import cli

ROOT = Path(__file__).resolve().parents[3]

JITTER = '''"""An RMSNorm whose every call also waits a random 0-2 ms."""

import random
import time

import torch

EPS = 1e-6


def make_inputs():
    return torch.randn(4, 512), torch.randn(512), EPS


# trainium: profile inputs=make_inputs
def rms_norm_jitter(x, weight, eps):
    time.sleep(random.uniform(0.0, 0.002))
    x2 = x * x
    mean = x2.mean(-1, keepdim=True)
    rstd = torch.rsqrt(mean + eps)
    return x * rstd * weight
'''


def _fix(ws: Path, file: str, function: str, *extra: str):
    proc = cli("profile", str(ws / file), function, "--workspace", str(ws))
    assert proc.returncode == 0, proc.stderr
    out = ws / "fix.json"
    proc = cli("fix", str(ws / file), function, "--apply", "--json", str(out), "--workspace", str(ws), *extra)
    (row,) = json.loads(out.read_text())
    return proc, row


def test_the_rmsnorm_edit_reports_its_paired_ratio_and_is_never_applied_as_faster(tmp_path):
    shutil.copy(ROOT / "examples" / "rmsnorm.py", tmp_path / "rmsnorm.py")
    original = (tmp_path / "rmsnorm.py").read_text()
    proc, row = _fix(tmp_path, "rmsnorm.py", "rms_norm_naive")
    assert row["basis"] == "paired unprofiled wall" and row["pairs"] >= 20
    assert row["speedup_low"] <= row["speedup"] <= row["speedup_high"]
    assert row["verdict"] in ("same", "slower", "not measurable"), row  # 1.02-1.04x: not a 5 % gain
    assert row["held"] is False and row["applied"] is False
    assert (tmp_path / "rmsnorm.py").read_text() == original
    assert f"99% interval {row['speedup_low']:.2f}×–{row['speedup_high']:.2f}×" in row["text"]
    assert f"1. rmsnorm.py:22 torch.nn.functional.rms_norm: {row['text']} [not applied]" in proc.stdout
    assert proc.returncode == (1 if row["verdict"] == "not measurable" else 0), proc.stderr


def test_not_measurable_applies_nothing_and_exits_1(tmp_path):
    (tmp_path / "jitter.py").write_text(JITTER)
    proc, row = _fix(tmp_path, "jitter.py", "rms_norm_jitter", "--seconds", "1")
    assert proc.returncode == 1, proc.stderr
    assert row["verdict"] == "not measurable" and row["held"] is False and row["applied"] is False
    assert "not measurable on this host now" in row["text"] and "nothing applied" in row["text"]
    assert (tmp_path / "jitter.py").read_text() == JITTER
    assert "not measurable on this host now" in proc.stdout


def test_seconds_out_of_range_is_refused_with_one_line(tmp_path):
    (tmp_path / "jitter.py").write_text(JITTER)
    proc = cli("fix", str(tmp_path / "jitter.py"), "--seconds", "0", "--workspace", str(tmp_path))
    assert proc.returncode == 2 and "--seconds must be 1 to 600" in proc.stderr

"""``trainium-lens compare`` on two real training-step runs: per-line backward
changes, lines of a second file named by file, totals whose parts add up,
``--json``. The real CLI, harness and torch.profiler on CPU.

The workspace: ``train.py`` (the marked step: loss, backward, SGD) calls
``mlp`` from ``parts.py``; between the two runs ``parts.py`` gains a gate line
(forward and backward of its own) and the ReLU line is edited.
"""

from __future__ import annotations

import json
import textwrap

import pytest

from tests.integration.cli.test_cli import cli, error_line
from trainium_lens.cli.render.text import fmt_us
from trainium_lens.model.result import load

TRAIN = """\
import torch
from torch import nn

from parts import mlp


def make():
    torch.manual_seed(0)
    fc, out = nn.Linear(64, 256), nn.Linear(256, 64)
    opt = torch.optim.SGD([*fc.parameters(), *out.parameters()], lr=1e-3)
    return fc, out, opt, torch.randn(32, 64), torch.randn(32, 64)


# trainium: profile inputs=make
def step(fc, out, opt, x, y):
    h = mlp(x, fc, out)
    loss = ((h - y) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss.detach()
"""

PARTS_BEFORE = """\
import torch


def mlp(x, fc, out):
    h = fc(x)
    h = torch.relu(h)
    return out(h)
"""

PARTS_AFTER = """\
import torch


def mlp(x, fc, out):
    h = fc(x)
    h = torch.nn.functional.gelu(h)
    h = h * torch.sigmoid(h)
    return out(h)
"""

FAST = ["--wait", "0", "--warmup", "1", "--active", "3", "--timing-calls", "5"]


@pytest.fixture(scope="module")
def two_steps(tmp_path_factory):
    ws = tmp_path_factory.mktemp("steps")
    env = {"TRAINIUM_LENS_CACHE": str(tmp_path_factory.mktemp("cache"))}
    (ws / "train.py").write_text(TRAIN)
    runs = []
    for i, parts in enumerate((PARTS_BEFORE, PARTS_AFTER)):
        (ws / "parts.py").write_text(parts)
        out = ws / f"run{i}.json"
        proc = cli(
            "profile", str(ws / "train.py"), "--workspace", str(ws), "--json", str(out), *FAST, env=env
        )
        assert proc.returncode == 0, proc.stderr
        runs.append(load(out))
    return ws, env, runs


def test_compare_shows_backward_per_line_and_file_qualified_lines(two_steps):
    ws, env, (before, after) = two_steps
    dest = ws / "diff.json"
    proc = cli("compare", before.run_id, after.run_id, "--workspace", str(ws), "--json", str(dest), env=env)
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    assert "  step (cpu): forward " in text and " · backward " in text
    header = next(ln for ln in text.splitlines() if ln.lstrip().startswith("line "))
    assert "bwd (cpu)" in header and "Δ bwd" in header and "fwd+bwd (cpu)" in header
    rows = {ln.split()[0]: ln for ln in text.splitlines() if ln.startswith("  parts.py:")}
    # parts.py's lines are named by file; the gate line is new, with backward of its own
    gate = after.line("parts.py", 7)
    assert gate is not None and gate.backward_self_time_us > 0
    assert "parts.py:7" in rows and rows["parts.py:7"].rstrip().endswith("added")
    assert "parts.py:5" in rows and rows["parts.py:5"].rstrip().endswith("same")
    assert rows["parts.py:6"].rstrip().endswith("edited")

    data = json.loads(dest.read_text())
    by = {(x["file"], x["after_line"]): x for x in data["lines"]}
    added = by[("parts.py", 7)]
    assert added["before_bwd_us"] is None
    assert added["after_bwd_us"] == pytest.approx(gate.backward_self_time_us + gate.recompute_time_us)
    fc = by[("parts.py", 5)]  # the Linear's backward, before and after, from the stored runs
    assert fc["before_bwd_us"] == pytest.approx(before.line("parts.py", 5).backward_self_time_us)
    assert fc["after_bwd_us"] == pytest.approx(after.line("parts.py", 5).backward_self_time_us)
    # the parts add up: every line's change plus the unattributed bucket's is the step's
    t = data["totals"]
    changes = sum(x["delta_us"] for x in data["lines"])
    changes += t["after_unattributed_us"] - t["before_unattributed_us"]
    assert changes == pytest.approx(t["delta_us"], rel=1e-9, abs=1e-6)
    assert t["before_us"] == pytest.approx(before.totals.self_time_us)
    assert t["speedup"] == pytest.approx(before.totals.wall_us_median / after.totals.wall_us_median)
    # the total row's forward column holds no optimizer time (SGD's ops are on the step line)
    assert t["after_optimizer_us"] > 0
    total = [ln for ln in text.splitlines() if ln.split()[:1] == ["total"]][-1]  # the table's row
    fwd = fmt_us(t["after_lines_fwd_us"] - t["after_optimizer_us"])
    assert f"→ {fwd}" in total, (total, fwd)


def test_compare_json_to_a_bad_path_is_one_line_and_keeps_the_table(two_steps, tmp_path):
    ws, env, (before, after) = two_steps
    proc = cli(
        "compare", before.run_id, after.run_id, "--workspace", str(ws), "--json", str(tmp_path), env=env
    )
    assert f"--json {tmp_path} is a folder: not written" in error_line(proc)  # and the folder is kept
    assert proc.stdout.startswith(f"step: {before.run_id} → {after.run_id}")


def test_parts_files_stay_apart_from_the_step_file(two_steps):
    """Sanity of the fixture: both files have figures, so the matching is across files."""
    _ws, _env, (before, _after) = two_steps
    files = {s.file for s in before.lines}
    assert files == {"train.py", "parts.py"}, textwrap.shorten(str(files), 80)

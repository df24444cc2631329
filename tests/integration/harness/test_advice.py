"""Advice that holds when measured, on real code through the real CLI and harness:
GPT-2's tanh GELU gets its fused op by name (and, with the fix applied, the
pattern and its eight dispatches are gone); a per-parameter AdamW's finding
names the implementation the harness measured fastest, with its time."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import DATA, ROOT
from tests.support.harness import line_of
from trainium_lens.analysis.findings.analyze import analyze
from trainium_lens.analysis.findings.patterns import GELU_TANH
from trainium_lens.model.result import Result

SERVER = ROOT / "server"
QUICK = ["--wait", "1", "--warmup", "1", "--active", "2", "--timing-calls", "3"]
GPT2 = "transformers/models/gpt2/modeling_gpt2.py"


def profile(tmp_path, function: str, *extra: str) -> Result | list[Result]:
    out = tmp_path / f"{function or 'all'}.json"
    args = [str(DATA / "advice.py"), *([function] if function else []), "--backend", "cpu", *QUICK, *extra]
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "trainium_lens",
            "profile",
            *args,
            "--no-store",
            "--json",
            str(out),
            "--workspace",
            str(ROOT),
        ],
        capture_output=True,
        text=True,
        cwd=str(ROOT),
        timeout=400,
        env={**os.environ, "PYTHONPATH": str(SERVER), "OMP_NUM_THREADS": "1"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(out.read_text())
    return [Result.from_dict(d) for d in data] if isinstance(data, list) else Result.from_dict(data)


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory):
    import transformers  # noqa: F401  (pinned in the test extras: a missing one must fail, not skip)

    results = profile(tmp_path_factory.mktemp("gpt2"), "", "--include", "transformers.models.gpt2")
    assert isinstance(results, list)
    by = {r.function.name: r for r in results}
    return by["gpt2_forward"], by["gpt2_forward_fused"]


def act_line(result: Result):
    (stat,) = [s for s in result.lines if s.file == GPT2 and "self.act(" in s.text]
    return stat


def test_gpt2_tanh_gelu_inside_transformers_is_said_to_be_there(gpt2):
    plain, _fused = gpt2
    act = act_line(plain)
    assert act.via_library == 1.0 and act.library_modules == ["transformers.activations"]
    assert act.hits == 2.0  # two blocks, one MLP each
    found = [f for f in plain.findings if (f.file, f.line) == (GPT2, act.line)]
    # said to be inside the library, without the library call's figures as the pattern's,
    # and no "fuse these dispatches" hint
    assert [f.kind for f in found] == ["library_pattern"]
    assert found[0].candidate == GELU_TANH and found[0].fix is None
    assert "Ops of the tanh GELU op by op" in found[0].message and "inside transformers" in found[0].message
    assert "--include transformers" in found[0].message and "dispatches" not in found[0].message
    assert 'activation_function="gelu_pytorch_tanh"' in found[0].message
    # no dispatch hint anywhere on a line whose ops all ran inside library code
    library_only = {(s.file, s.line) for s in plain.lines if (s.via_library or 0) >= 0.5}
    assert not [f for f in plain.findings if f.kind == "dispatches" and (f.file, f.line) in library_only]


def test_with_the_fix_applied_the_gelu_is_one_dispatch_and_no_finding(gpt2):
    plain, fused = gpt2
    act = act_line(fused)
    assert act.calls / act.hits == 1.0 and act_line(plain).calls / act_line(plain).hits == 8.0
    assert [o.name for o in act.ops if o.direct_calls] == ["aten::gelu"]
    assert not [f for f in fused.findings if f.kind in ("fused_op", "library_pattern")]
    assert fused.output.max_abs_diff is not None and fused.output.max_abs_diff < 1e-3  # the same function


def test_optimizer_finding_names_what_measured_fastest(tmp_path):
    r = profile(tmp_path, "train_step")
    assert isinstance(r, Result)
    (opt,) = [o for o in r.optimizers if o.name == "Optimizer.step#AdamW.step"]
    assert (opt.file, opt.line) == ("tests/data/advice.py", line_of(DATA / "advice.py", "optimizer.step()"))
    assert opt.trials_device == "cpu"
    assert [(t.config, t.current) for t in opt.trials] == [
        ("foreach=False", True),
        ("foreach=True", False),
        ("fused=True", False),
    ]
    assert all(t.time_us and t.time_us_min and t.steps >= 5 for t in opt.trials), opt.trials
    fastest = min(opt.trials, key=lambda t: t.time_us_min or 0.0)  # the best step of each
    current = opt.trials[0]
    assert current.time_us_min is not None and fastest.time_us_min is not None
    findings = analyze(r)
    found = [f for f in findings if f.kind == "optimizer_loop"]
    if fastest is current or current.time_us_min / fastest.time_us_min < 1.1:
        assert found == []  # the loop measured fastest here: no advice to change it
        return
    if any(f.kind == "noisy_measurement" for f in findings):
        assert found == []  # a loaded machine: timing-based advice is withheld (analysis/noise.py)
        return
    (f,) = found
    if "was disturbed" in f.message:  # the trials themselves disturbed: no implementation named
        assert "so no implementation is named" in f.message and "is fastest" not in f.message
        return
    assert f.fix == f"AdamW(..., {fastest.config})" and f"{fastest.config} is fastest" in f.message
    for t in opt.trials:  # every measured figure, in the words the finding prints
        assert f"{t.config} " in f.message
    assert f.line == opt.line

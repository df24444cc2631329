"""No finding claims what its run did not measure, on the bundled example and a
tiny HF Llama training step (the real CLI, harness and profiler on CPU): a fused
op, torch.compile or checkpointing is only ever named as untested; a pattern
never covers a line of other work (the optimizer's step) or a library call's
ops; the only finding that says "faster" is the optimizer's, whose trials
measured it in the same run."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, ROOT
from tests.integration.cli.test_cli import cli
from trainium_lens.model.result import Result

MEASURED = {"optimizer_loop", "optimizer_choice"}  # their message carries the trial's figures
CLAIM = re.compile(r"faster|does it in one|would make it|fuse them|recompute \(|~[\d.]+ \S+ of recompute")


def profile(path: Path, ws: Path, *extra: str) -> list[Result]:
    out = ws / f"{path.stem}.json"
    proc = cli("profile", str(path), "--workspace", str(ws), "--no-store", "--json", str(out), *extra)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(out.read_text())
    return [Result.from_dict(d) for d in (data if isinstance(data, list) else [data])]


def unmeasured_claims(result: Result) -> list[str]:
    return [
        f"{f.kind}:{f.line}: {f.message}"
        for f in result.findings
        if f.kind not in MEASURED and CLAIM.search(f.message) and "untested" not in f.message
    ]


def test_bundled_example_claims_nothing_unmeasured(tmp_path):
    (tmp_path / "examples").mkdir()
    shutil.copy(EXAMPLES / "rmsnorm.py", tmp_path / "examples" / "rmsnorm.py")
    results = profile(tmp_path / "examples" / "rmsnorm.py", tmp_path)
    for r in results:
        assert unmeasured_claims(r) == [], r.function.name
        for f in r.findings:
            if f.candidate:  # a change named is named as untested, never as the fix
                assert "untested" in f.message and f.fix != f.candidate, f


def test_llama_step_pattern_spans_no_other_line_and_sums_no_library_work(tmp_path):
    pytest.importorskip("transformers")
    shutil.copy(ROOT / "tests" / "data" / "llama_step.py", tmp_path / "llama_step.py")
    (r,) = profile(tmp_path / "llama_step.py", tmp_path, "--backend", "cpu")
    assert unmeasured_claims(r) == []
    step_lines = {o.line for o in r.optimizers}
    library = {s.line for s in r.lines if (s.via_library or 0) >= 0.5}
    for f in r.findings:
        if f.kind == "fused_op":  # none of its lines is the optimizer's or a library call's
            covered = {int(n) for n in re.findall(r"\d+", f.message.split(" of ")[0])}
            assert not covered & (step_lines | library), f.message
        if f.kind == "library_pattern":
            assert "--include transformers" in f.message and "µs" not in f.message
    # the optimizer built without fused= gets its measured finding, or the fix offered on a noisy run
    opt = [f for f in r.findings if f.kind in MEASURED | {"fix_offered"} and f.edit is not None]
    assert all(f.edit and f.edit.title.startswith("AdamW(..., ") for f in opt)

"""Variants are compared on every tensor they return, not the first alone: a
variant that keeps the first output but changes the second differs, one that
returns fewer tensors cannot be compared. Real harness, real torch, the
variants' comparison as ``compare`` and ``fix`` read it (analysis/variants)."""

from __future__ import annotations

import json

from tests.support.harness import run_harness
from trainium_lens.analysis.variants import compare_variants
from trainium_lens.model.result import Batch

SOURCE = """import torch


def make_inputs():
    torch.manual_seed(0)
    return (torch.randn(16, 16),)


# trainium: profile inputs=make_inputs wait=0 warmup=0 active=1 timing_calls=1
def both(x):
    return x @ x, {"loss": x.sum()}


# trainium: profile inputs=make_inputs wait=0 warmup=0 active=1 timing_calls=1
def same(x):
    return torch.mm(x, x), {"loss": x.sum(0).sum()}


# trainium: profile inputs=make_inputs wait=0 warmup=0 active=1 timing_calls=1
def second_changed(x):
    return x @ x, {"loss": x.sum() * 1.01}


# trainium: profile inputs=make_inputs wait=0 warmup=0 active=1 timing_calls=1
def first_only(x):
    return (x @ x,)
"""


def test_every_returned_tensor_is_compared(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "outs.py").write_text(SOURCE)
    code, events, stderr = run_harness(ws, "outs.py", tmp_path / "run", backend="cpu")
    assert code == 0, stderr[-3000:] + json.dumps(events[-2:])
    results = Batch.from_dict(json.loads((tmp_path / "run" / "batch.json").read_text())).results
    by_name = {r.function.name: r for r in results}
    assert by_name["both"].output.tensors == 2 and by_name["first_only"].output.tensors == 1
    assert by_name["first_only"].output.mismatch == "returned 1 tensors where both returned 2"
    rows = {row.variant: row for row in compare_variants(results).rows}
    assert rows["same"].verdict == "ok"
    assert rows["second_changed"].verdict == "differs"  # its first tensor is the same
    assert rows["second_changed"].max_abs_diff > 0.01  # 1 % of the loss (about 6.6)
    assert rows["first_only"].verdict == "shape differs"

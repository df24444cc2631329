"""Variants of one comparison: each starts from the same inputs and their walls
are timed in turn (harness/eager/paired.py). Two training steps that share one
``inputs=`` with ``compare=`` return the weights they updated: equal, because the
second starts from a copy of the state the first started from (on the shared
objects it would start from a model the first had trained for dozens of steps),
and what a variant returned is read right after its first call (the second
returns the live parameters, which its later steps keep updating).
Real harness, real torch; no timing is judged, only that the figures exist."""

from __future__ import annotations

import json

from tests.support.harness import run_harness
from trainium_lens.analysis.variants import compare_variants
from trainium_lens.model.result import Batch

SOURCE = """import torch
from torch import nn


def make():
    model = nn.Sequential(nn.Linear(16, 16), nn.Linear(16, 16))
    return model, torch.optim.SGD(model.parameters(), lr=0.1), torch.randn(8, 16)


# trainium: profile inputs=make compare=step wait=0 warmup=0 active=1 timing_calls=4
def step_a(model, opt, x):
    opt.zero_grad()
    model(x).square().mean().backward()
    opt.step()
    return [p.detach().clone() for p in model.parameters()]


# trainium: profile inputs=make compare=step wait=0 warmup=0 active=1 timing_calls=6
def step_b(model, opt, x):
    opt.zero_grad()
    (model(x) ** 2).mean().backward()
    opt.step()
    return [p.detach() for p in model.parameters()]  # the live weights: read after the first call


def other():
    return torch.ones(3) * 2


# trainium: profile wait=0 warmup=0 active=1 timing_calls=3
def alone():
    return other()
"""


def test_compared_training_steps_start_alike_and_are_timed_in_turn(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "steps.py").write_text(SOURCE)
    code, events, stderr = run_harness(ws, "steps.py", tmp_path / "run", backend="cpu")
    assert code == 0, stderr[-3000:] + json.dumps(events[-2:])
    results = Batch.from_dict(json.loads((tmp_path / "run" / "batch.json").read_text())).results
    by = {r.function.name: r for r in results}
    rows = {row.variant: row for row in compare_variants([by["step_a"], by["step_b"]]).rows}
    assert rows["step_b"].verdict == "ok" and rows["step_b"].max_abs_diff < 1e-6, rows["step_b"]
    for name in ("step_a", "step_b"):
        t, st = by[name].totals, by[name].stability
        assert t.paired_wall_us_median and t.paired_wall_us_min, t
        assert 0 < t.paired_wall_us_min <= t.paired_wall_us_median <= t.paired_wall_us_max
        assert st is not None and st.paired_rounds == 6  # the group's most timing calls
    assert by["alone"].totals.paired_wall_us_median is None  # no comparison: not paired
    stages = [e.get("message", "") for e in events if e.get("event") == "stage"]
    assert any("2 variants in turn (step_a, step_b): 6 rounds" in m for m in stages), stages

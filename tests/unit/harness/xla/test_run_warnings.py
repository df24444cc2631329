"""What an xla run warns about: an optimizer built before the harness moved the
model holds the old (CPU) parameters, so its step would update nothing, silently
(docs/profiling.md asks for it inside ``inputs=``, after ``model.to(device)``); a graph
another function of the batch compiled first carries that function's lines."""

from __future__ import annotations

import torch

from trainium_lens.harness.xla.run_warnings import stale_optimizers


def test_an_optimizer_left_on_the_host_is_named_and_one_on_the_device_is_not():
    model = torch.nn.Linear(4, 4)
    opt = torch.optim.AdamW(model.parameters())
    [warning] = stale_optimizers([model, {"optimizers": {"adamw": opt}}, torch.ones(2)], "xla:0")
    assert warning.startswith("AdamW holds parameters on cpu, not on xla:0") and "updates nothing" in warning
    assert stale_optimizers([model, (opt, opt)], "xla:0") == [warning]  # once per optimizer
    assert stale_optimizers([model, torch.ones(2)], "xla:0") == []


def test_a_graph_another_function_compiled_first_is_named(monkeypatch):
    from trainium_lens.harness.xla import run_warnings

    monkeypatch.setattr(run_warnings, "_FIRST_RAN", {})
    assert run_warnings.reused_graphs({"SyncTensorsGraph.10", "SyncTensorsGraph.20"}, "train_step") == []
    assert run_warnings.reused_graphs({"SyncTensorsGraph.20"}, "train_step") == []  # its own, again
    [warning] = run_warnings.reused_graphs({"SyncTensorsGraph.20", "SyncTensorsGraph.30"}, "logged")
    assert "first compiled while profiling train_step" in warning and "profile logged alone" in warning

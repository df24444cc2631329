"""harness/eager/optim_trials.py: an optimizer's step implementations timed on
copies, in-process on this machine's CPU with the real torch.optim. The whole
path (harness → result → finding) runs in tests/integration/harness/test_advice.py."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from trainium_lens.harness.eager import optim_trials as T
from trainium_lens.harness.job.loader import UserCode

HERE = Path(__file__).resolve()


def trained(cls, **kwargs):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 8))
    opt = cls(model.parameters(), lr=1e-2, **kwargs)
    for _ in range(2):  # state (moments, step counts) exists, as after the profiled steps
        opt.zero_grad()
        model(torch.randn(16, 32)).square().mean().backward()
        opt.step()
    return model, opt


def watched(opt) -> tuple[T.OptimizerWatch, int]:
    watch = T.OptimizerWatch(UserCode(str(HERE.parent)))
    with watch.watch():
        line = opt.step.__code__ and _step(opt)
    return watch, line


def _step(opt) -> int:
    opt.step()  # the user line the watch must name
    return _step.__code__.co_firstlineno + 1


def snapshot(model, opt):
    params = [p.detach().clone() for p in model.parameters()]
    grads = [p.grad.detach().clone() for p in model.parameters()]
    state = {
        k: {n: (v.clone() if torch.is_tensor(v) else v) for n, v in s.items()} for k, s in opt.state.items()
    }
    return params, grads, state


def test_three_implementations_timed_on_copies_and_the_users_state_untouched():
    model, opt = trained(torch.optim.AdamW, foreach=False)
    watch, line = watched(opt)
    assert [(x.file, x.line) for x in watch.seen.values()] == [(HERE.name, line)]
    before = snapshot(model, opt)
    (m,) = T.measure(watch, lambda: None, budget_s=0.05)
    assert (m["name"], m["file"], m["line"], m["device"]) == (
        "Optimizer.step#AdamW.step",
        HERE.name,
        line,
        "cpu",
    )
    assert [t["config"] for t in m["trials"]] == ["foreach=False", "foreach=True", "fused=True"]
    assert [t["current"] for t in m["trials"]] == [True, False, False]
    for t in m["trials"]:
        assert t.get("error") is None and t["steps"] >= T.MIN_STEPS
        assert 0 < t["time_us_min"] <= t["time_us"] <= t["time_us_max"]
    after = snapshot(model, opt)
    assert all(torch.equal(a, b) for a, b in zip(before[0] + before[1], after[0] + after[1], strict=True))
    for key, state in before[2].items():
        assert all(
            torch.equal(torch.as_tensor(v), torch.as_tensor(after[2][key][n])) for n, v in state.items()
        )


@pytest.mark.parametrize("config", [c for c, _ in T.CONFIGS])
def test_a_copy_carries_the_state_so_its_step_is_the_users_next_step(config):
    """The copy is the same optimizer mid-training (moments, step count), not a
    fresh one: its next step moves the parameters exactly as the original's does."""
    model, opt = trained(torch.optim.Adam, betas=(0.5, 0.9))
    flags = dict(T.CONFIGS)[config]
    new = T._copy(opt, flags)
    group = new.param_groups[0]
    assert (group["foreach"], group["fused"]) == (flags["foreach"], flags["fused"])
    assert (
        new.state[group["params"][0]]["exp_avg"].data_ptr()
        != opt.state[model[0].weight]["exp_avg"].data_ptr()
    )
    new.step()
    opt.step()
    for p, q in zip(model.parameters(), group["params"], strict=True):
        torch.testing.assert_close(q, p.detach(), rtol=1e-5, atol=1e-6)


def test_an_implementation_the_class_lacks_says_so():
    model, opt = trained(torch.optim.RMSprop)
    watch, _line = watched(opt)
    (m,) = T.measure(watch, lambda: None, budget_s=0.02)
    by = {t["config"]: t for t in m["trials"]}
    assert by["fused=True"]["error"] == "RMSprop has no fused= option" and "time_us" not in by["fused=True"]
    assert by["foreach=False"]["current"] and by["foreach=False"]["time_us"] > 0
    assert by["foreach=True"]["time_us"] > 0


def test_attach_puts_trials_on_their_entry_and_no_grads_measures_nothing():
    model, opt = trained(torch.optim.SGD, momentum=0.9)
    watch, line = watched(opt)
    measured = T.measure(watch, lambda: None, budget_s=0.02)
    entries: list[dict] = [
        {"name": "Optimizer.zero_grad#SGD.zero_grad", "file": HERE.name, "line": line},
        {"name": "Optimizer.step#SGD.step", "file": HERE.name, "line": line},
    ]
    T.attach(entries, measured)
    assert (
        "trials" not in entries[0] and len(entries[1]["trials"]) == 3 and entries[1]["trials_device"] == "cpu"
    )
    for p in model.parameters():
        p.grad = None
    watch, _line = watched(opt)
    assert T.measure(watch, lambda: None) == []  # no gradients when it stepped: nothing to compare


def test_gradients_cleared_after_the_step_are_the_ones_it_stepped_with():
    """nanoGPT's loop ends in ``zero_grad(set_to_none=True)``: the trials use
    the gradients copied when the step began."""
    model, opt = trained(torch.optim.AdamW)
    grads = [p.grad.clone() for p in model.parameters()]
    watch, _line = watched(opt)
    opt.zero_grad(set_to_none=True)
    (m,) = T.measure(watch, lambda: None, budget_s=0.02)
    assert all(t["time_us"] for t in m["trials"])
    seen = T.OptimizerWatch(watch.user)
    with seen.watch():
        for p, g in zip(model.parameters(), grads, strict=True):
            p.grad = g.clone()
        _step(opt)
    opt.zero_grad(set_to_none=True)
    (x,) = seen.seen.values()
    copy = T._copy(opt, dict(T.CONFIGS)["fused=True"], x.grads)
    for q, g in zip(copy.param_groups[0]["params"], grads, strict=True):
        assert torch.equal(q.grad, g)


def test_each_other_implementation_gets_its_paired_ratio_to_what_runs_now():
    model, opt = trained(torch.optim.SGD, momentum=0.9, foreach=False)
    watch, _line = watched(opt)
    (m,) = T.measure(watch, lambda: None, budget_s=0.05, delay=lambda: 0.0)
    now, *others = m["trials"]
    assert now["current"] and now.get("paired_ratio") is None  # no ratio to itself
    for t in others:
        assert t["paired_verdict"] in ("faster", "slower", "same", "undecided")
        assert t["paired_ratio"] > 0 and (t["paired_low"] is None or t["paired_low"] <= t["paired_ratio"])


def test_rounds_in_which_a_step_waited_for_a_cpu_are_left_out_of_the_ratios():
    trials = {"a": {"current": True}, "b": {"current": False}}
    times = {"a": [100.0, 900.0, 100.0, 100.0], "b": [50.0, 60.0, 50.0, 50.0]}
    rounds_of = {"a": [0, 1, 2, 3], "b": [0, 1, 2, 3]}
    # round 1: the loop ("a") was preempted; its 15x ratio is no speedup of "b"
    assert T._ratios(times, rounds_of, [True, False, True, True], trials, "a", "b") == [2.0, 2.0, 2.0]
    # most rounds disturbed: all of them, as the unprofiled wall does
    assert len(T._ratios(times, rounds_of, [False, False, True, False], trials, "a", "b") or []) == 4

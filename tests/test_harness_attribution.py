"""The attribution pass on real profiles, in-process: labelled/plain step pairing
(CPU times from the unlabelled twin), reconciliation, linear cost."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from trainium_lens.harness import run  # noqa: E402
from trainium_lens.harness.attribution import attribute  # noqa: E402
from trainium_lens.harness.lines import LineLabeler  # noqa: E402
from trainium_lens.harness.loader import UserCode, load_module  # noqa: E402

DATA = Path(__file__).resolve().parent / "data"
CPU = torch.autograd.DeviceType.CPU


@pytest.fixture(scope="module")
def helpers():
    module = load_module(str(DATA / "helpers.py"), str(DATA), "helpers.py")
    labeler = LineLabeler(UserCode(str(DATA)), run.invoke.__code__)
    return module, labeler


def profile_steps(labeler, calls):
    """One profile; ``calls`` = [(fn, labelled)] one per measured step."""
    x = torch.randn(4, 8)
    schedule = torch.profiler.schedule(wait=0, warmup=1, active=len(calls), repeat=1)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                schedule=schedule) as prof:
        for fn, labelled in [calls[0]] + list(calls):  # the first: warmup
            if labelled:
                with labeler:
                    run.invoke(fn, (x,), {})
            else:
                run.invoke(fn, (x,), {})
            prof.step()
    return prof.events()


def aten_cpu_by_step(events):
    steps = sorted((e for e in events if e.name.startswith("ProfilerStep")),
                   key=lambda e: e.time_range.start)
    out = []
    for step in steps:
        total, stack = 0.0, list(step.cpu_children)
        while stack:
            e = stack.pop()
            if e.name.startswith("aten::"):
                total += e.self_cpu_time_total
            stack.extend(e.cpu_children)
        out.append(total)
    return out


def test_cpu_times_come_from_the_plain_twin(helpers):
    module, labeler = helpers
    events = profile_steps(labeler, [(module.two_calls, True), (module.two_calls, False)] * 2)
    att = attribute(events, labeler.labels, False, None, CPU, paired=True)
    assert (att.steps, att.paired_steps, att.mismatched_steps) == (2, 2, 0)
    per_step = aten_cpu_by_step(events)
    plain = per_step[1] + per_step[3]
    labelled = per_step[0] + per_step[2]
    ours = sum(v[3] for v in att.ops.values())  # op self CPU, summed over the steps
    assert ours == pytest.approx(plain, rel=1e-9)
    assert ours != pytest.approx(labelled, rel=1e-9)
    lines = sum(v for (s, k), v in att.line_self.items())
    assert lines == pytest.approx(ours, rel=1e-9)
    assert None not in {k for (_s, k) in att.line_self}  # every op on a line
    assert {labeler.labels[k][2] for (_s, k) in att.line_self} == {"scale", "two_calls"}


def test_a_twin_that_ran_other_ops_is_not_used(helpers):
    module, labeler = helpers
    events = profile_steps(labeler, [(module.two_calls, True), (module.loop, False)])
    att = attribute(events, labeler.labels, False, None, CPU, paired=True)
    assert (att.steps, att.paired_steps, att.mismatched_steps) == (1, 0, 1)
    assert sum(v[3] for v in att.ops.values()) == pytest.approx(aten_cpu_by_step(events)[0])


def test_unlabelled_ops_are_unattributed_and_still_reconcile(helpers):
    module, labeler = helpers
    events = profile_steps(labeler, [(module.two_calls, False)])
    att = attribute(events, labeler.labels, False, None, CPU)
    assert {k for (_s, k) in att.line_self} == {None}
    assert sum(att.line_self.values()) == pytest.approx(aten_cpu_by_step(events)[0])

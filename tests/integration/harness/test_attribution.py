"""The attribution pass on real profiles, in-process: labelled/plain step pairing
(CPU times from the unlabelled twin), reconciliation, linear cost."""

from __future__ import annotations

import pytest
import torch  # a test dependency: these tests must run, never skip

from tests.conftest import DATA
from trainium_lens.harness.attribution.kinds import FWD
from trainium_lens.harness.attribution.tree import attribute
from trainium_lens.harness.eager.backends import Backend
from trainium_lens.harness.eager.lines import LineLabeler
from trainium_lens.harness.job.loader import UserCode, load_module
from trainium_lens.harness.runtime import call

CPU = torch.autograd.DeviceType.CPU


@pytest.fixture(scope="module")
def helpers():
    module = load_module(str(DATA / "helpers.py"), str(DATA), "helpers.py")
    labeler = LineLabeler(UserCode(str(DATA)), call.invoke.__code__)
    return module, labeler


def profile_steps(labeler, calls):
    """One profile; ``calls`` = [(fn, labelled)] one per measured step."""
    x = torch.randn(4, 8)
    schedule = torch.profiler.schedule(wait=0, warmup=1, active=len(calls), repeat=1)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], schedule=schedule) as prof:
        for fn, labelled in [calls[0]] + list(calls):  # the first: warmup
            if labelled:
                with labeler:
                    call.invoke(fn, (x,), {})
            else:
                call.invoke(fn, (x,), {})
            prof.step()
    return prof.events()


def aten_cpu_by_step(events):
    steps = sorted((e for e in events if e.name.startswith("ProfilerStep")), key=lambda e: e.time_range.start)
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
    ours = sum(v.cpu for v in att.ops.values())  # op self CPU, summed over the steps
    assert ours == pytest.approx(plain, rel=1e-9)
    assert ours != pytest.approx(labelled, rel=1e-9)
    lines = sum(v for (s, k, p), v in att.line_self.items())
    assert lines == pytest.approx(ours, rel=1e-9)
    assert None not in {k for (_s, k, _p) in att.line_self}  # every op on a line
    assert {labeler.labels[k][2] for (_s, k, _p) in att.line_self} == {"scale", "two_calls"}


def test_a_twin_that_ran_other_ops_is_not_used(helpers):
    module, labeler = helpers
    events = profile_steps(labeler, [(module.two_calls, True), (module.loop, False)])
    att = attribute(events, labeler.labels, False, None, CPU, paired=True)
    assert (att.steps, att.paired_steps, att.mismatched_steps) == (1, 0, 1)
    assert sum(v.cpu for v in att.ops.values()) == pytest.approx(aten_cpu_by_step(events)[0])


def test_unlabelled_ops_are_unattributed_and_still_reconcile(helpers):
    module, labeler = helpers
    events = profile_steps(labeler, [(module.two_calls, False)])
    att = attribute(events, labeler.labels, False, None, CPU)
    assert {k for (_s, k, _p) in att.line_self} == {None}
    assert sum(att.line_self.values()) == pytest.approx(aten_cpu_by_step(events)[0])


def test_host_to_device_copies_are_noted_per_line():
    # "meta" stands in for an accelerator: any non-CPU device takes the same path
    module = load_module(str(DATA / "h2d.py"), str(DATA), "h2d.py")
    labeler = LineLabeler(UserCode(str(DATA)), call.invoke.__code__, device_backend=True)
    x = torch.ones(4, device="meta")
    for _ in range(2):
        with labeler:
            call.invoke(module.promote, (x,), {})
    text = (DATA / "h2d.py").read_text().splitlines()
    line = next(i for i, t in enumerate(text, 1) if "H2D-LINE" in t)
    assert labeler.h2d == {f"h2d.py({line}): promote": 2}


# -- the device clock (CUDA/Neuron): no device here, so stand-in events ----------


class _Range:
    def __init__(self, start, end):
        self.start, self.end = start, end


class _Kernel:
    def __init__(self, duration):
        self.duration = duration


class _Ev:
    """Stand-in for a FunctionEvent with the fields the pass reads."""

    def __init__(self, name, start, end, children=(), kernels=()):
        self.name, self.time_range = name, _Range(start, end)
        self.cpu_children = list(children)
        self.kernels = [_Kernel(k) for k in kernels]
        self.cpu_parent = None
        self.device_type = CPU
        self.id, self.thread, self.sequence_nr, self.fwd_thread = id(self), 1, -1, 0
        for c in self.cpu_children:
            c.cpu_parent = self


def _flatten(roots):
    out, stack = [], list(roots)
    while stack:
        e = stack.pop()
        out.append(e)
        stack.extend(e.cpu_children)
    return out


def test_device_clock_kernels_go_to_the_nearest_op():
    labels = {"m.py(3): f": ("m.py", 3, "f"), "m.py(4): f": ("m.py", 4, "f"), "m.py(9): g": ("m.py", 9, "g")}
    # line 9 calls f; line 3 dispatches mul (kernel 10, plus a runtime event's
    # kernel 5 that belongs to it); line 4 runs a compiled region whose nested
    # extern op launches 7 and the region itself 20; one kernel under no op.
    runtime = _Ev("cudaLaunchKernel", 2, 3, kernels=[5])
    mul = _Ev("aten::mul", 1, 4, [runtime], kernels=[10])
    line3 = _Ev("m.py(3): f", 1, 5, [mul])
    mm = _Ev("aten::mm", 11, 12, kernels=[7])
    region = _Ev("Torch-Compiled Region: 0/0", 10, 15, [mm], kernels=[20])
    line4 = _Ev("m.py(4): f", 9, 16, [region])
    outer3 = _Ev("m.py(9): g", 0, 6, [line3])
    outer4 = _Ev("m.py(9): g", 8, 17, [line4])
    stray = _Ev("cudaDeviceSynchronize", 18, 19, kernels=[3])
    step = _Ev("ProfilerStep#3", 0, 20, [outer3, outer4, stray])
    att = attribute(_flatten([step]), labels, True, None, CPU)
    assert att.steps == 1
    assert att.ops["aten::mul"].self_time == 15 and att.ops["aten::mul"].device == 15
    assert att.ops["aten::mm"].self_time == 7
    assert att.ops["Torch-Compiled Region: 0/0"].self_time == 20  # self: own kernels
    assert att.ops["Torch-Compiled Region: 0/0"].total_time == 27  # total: with the nested op
    assert att.regions[("Torch-Compiled Region: 0/0", "m.py(4): f")] == [1, 27, FWD]
    assert att.line_self[(0, "m.py(3): f", FWD)] == 15 and att.line_self[(0, "m.py(4): f", FWD)] == 27
    assert att.line_total[(0, "m.py(9): g", FWD)] == 42  # both calls, each op once
    assert att.line_calls["m.py(3): f"] == 1 and att.line_calls["m.py(4): f"] == 1
    assert att.device_unowned == 3
    # CPU time is still kept beside the device clock (self CPU: nested ops excluded)
    assert att.ops["Torch-Compiled Region: 0/0"].cpu == 4 and att.ops["aten::mm"].cpu == 1


class _NoDeviceTimeBackend(Backend):
    """Stand-in for a device backend whose profiler reports no device time (as one
    TorchNeuron build did): runs on CPU but claims the device clock."""

    name = "cuda"
    device = "cpu"
    device_clock = True


def test_no_device_time_falls_back_visibly_to_the_cpu_clock(tmp_path):
    from trainium_lens.harness.eager.run import Session, profile_function
    from trainium_lens.harness.markers import find_marked
    from trainium_lens.harness.spec import Spec

    sent = []

    class Events:
        def emit(self, event, **fields):
            sent.append({"event": event, **fields})

        def stage(self, stage, function, message, **extra):
            self.emit("stage", stage=stage, function=function, message=message, **extra)

        def warning(self, message):
            self.emit("warning", message=message)

    spec = Spec(
        batch_id="nd",
        workspace_root=str(DATA),
        file="helpers.py",
        run_dir=str(tmp_path),
        protocol={"timing_calls": 1},
    )
    module = load_module(str(DATA / "helpers.py"), str(DATA), "helpers.py")
    session = Session(
        spec,
        Events(),  # type: ignore[arg-type]
        _NoDeviceTimeBackend(torch),
        module,
        UserCode(str(DATA)),
        "helpers.py",
    )
    marked = next(m for m in find_marked((DATA / "helpers.py").read_text()) if m.name == "loop")
    result = profile_function(session, marked, 0, {"wait": 0, "warmup": 1, "active": 2, "timing_calls": 1})
    assert result["backend"] == "cuda" and result["clock"] == "cpu"
    assert result["signals"]["device_time_reported"] is False
    assert result["totals"]["self_time_us"] > 0  # CPU figures, said to be CPU
    assert any("no device time" in e["message"] for e in sent if e["event"] == "warning")

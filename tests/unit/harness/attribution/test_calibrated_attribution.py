"""The attribution pass with calibration, left-out steps, several calls per step,
and AOTAutograd's compiled backward linked to its forward line — on event
trees built by hand (the fields ``prof.events()`` gives the pass)."""

from __future__ import annotations

import pytest

from trainium_lens.harness.attribution.figures import lines_and_ops
from trainium_lens.harness.attribution.kinds import BWD, FWD
from trainium_lens.harness.attribution.tree import attribute

LABELS = {"m.py(3): f": ("m.py", 3, "f"), "m.py(4): f": ("m.py", 4, "f"), "m.py(8): f": ("m.py", 8, "f")}
L3, L4, L8 = "m.py(3): f", "m.py(4): f", "m.py(8): f"


class _Range:
    def __init__(self, start, end):
        self.start, self.end = start, end


class _Ev:
    def __init__(self, name, start, end, children=(), seq=-1, fwd_thread=0):
        self.name, self.time_range = name, _Range(start, end)
        self.cpu_children = list(children)
        self.kernels = []
        self.cpu_parent = None
        self.device_type = "cpu"
        self.id, self.thread, self.sequence_nr, self.fwd_thread = id(self), 1, seq, fwd_thread
        for c in self.cpu_children:
            c.cpu_parent = self


def _flatten(roots):
    out, stack = [], list(roots)
    while stack:
        e = stack.pop()
        out.append(e)
        stack.extend(e.cpu_children)
    return out


def _nested_step(t0: float, name: str = "ProfilerStep#1"):
    """Line 3 calls an op (10 µs) holding a child (4 µs) holding a grandchild (1 µs)."""
    grand = _Ev("aten::copy_", t0 + 3, t0 + 4)
    child = _Ev("aten::_to_copy", t0 + 2, t0 + 6, [grand])
    op = _Ev("aten::mean", t0 + 1, t0 + 11, [child])
    return _Ev(name, t0, t0 + 12, [_Ev(L3, t0 + 0.5, t0 + 11.5, [op])])


def test_calibration_takes_the_cost_per_nesting_level_off_primary_figures_only():
    att = attribute(_flatten([_nested_step(0)]), LABELS, False, None, "cpu", per_depth_us=0.5)
    # depth 1 costs 0.5, depth 2 costs 1.0: 10 µs raw, 8.5 µs calibrated
    assert att.line_self[(0, L3, FWD)] == pytest.approx(8.5)
    assert att.line_cpu[(0, L3, FWD)] == pytest.approx(10.0)  # raw CPU stays
    assert att.line_total[(0, L3, FWD)] == pytest.approx(8.5)
    assert att.ops["aten::copy_"].self_time == pytest.approx(0.0)
    assert att.ops["aten::_to_copy"].self_time == pytest.approx(3.0 - 0.5)
    assert att.ops["aten::mean"].self_time == pytest.approx(6.0)  # depth 0: nothing off
    assert att.calibrated_us == pytest.approx(1.5)
    fig = lines_and_ops(att, LABELS, _NoSource())
    assert fig["self_time_us"] == pytest.approx(8.5) and fig["self_cpu_us"] == pytest.approx(10.0)


def test_a_cost_larger_than_a_tiny_op_spills_into_its_owner():
    att = attribute(_flatten([_nested_step(0)]), LABELS, False, None, "cpu", per_depth_us=0.8)
    # the grandchild (1 µs) would lose 1.6: it loses 1, its owner the other 0.6
    assert att.ops["aten::copy_"].self_time == pytest.approx(0.0)
    assert att.ops["aten::_to_copy"].self_time == pytest.approx(3.0 - 0.8 - 0.6)
    assert att.line_self[(0, L3, FWD)] == pytest.approx(10.0 - 0.8 - 1.6)


def test_a_self_time_smaller_than_its_cost_is_settled_in_its_owner_not_below_zero():
    # the child's own time (4 µs window less its 1 µs grandchild: 3 µs) is less than
    # its cost at depth 1 (3.5), and the grandchild (1 µs) costs 7 at depth 2: both
    # settle at 0, the rest of their costs (6 + 6.5) come off the top-level op
    att = attribute(_flatten([_nested_step(0)]), LABELS, False, None, "cpu", per_depth_us=3.5)
    copy, to_copy, mean = (att.ops[n].self_time for n in ("aten::copy_", "aten::_to_copy", "aten::mean"))
    assert copy == 0.0 and to_copy == 0.0
    # costs: 3.5 (depth 1) + 7 (depth 2) = 10.5, more than the 10 µs op: settled at 0, 0.5 given back
    assert mean == pytest.approx(0.0)
    assert att.line_self[(0, L3, FWD)] == pytest.approx(0.0)
    assert att.line_total[(0, L3, FWD)] == pytest.approx(0.0)
    assert att.calibrated_us == pytest.approx(10.0)  # what was really taken off


def test_a_settled_line_keeps_its_sums_and_other_lines_keep_theirs():
    # a realistic disturbed read: 1.2 µs per level on the nest (needs 3.6 of 10 µs)
    att = attribute(_flatten([_nested_step(0)]), LABELS, False, None, "cpu", per_depth_us=1.2)
    selfs = [att.ops[n].self_time for n in ("aten::copy_", "aten::_to_copy", "aten::mean")]
    assert min(selfs) >= 0.0
    assert sum(selfs) == pytest.approx(10.0 - 3.6)
    assert att.line_self[(0, L3, FWD)] == pytest.approx(att.line_total[(0, L3, FWD)])
    assert att.calibrated_us == pytest.approx(3.6)


def test_device_clocks_are_not_calibrated():
    att = attribute(_flatten([_nested_step(0)]), LABELS, True, None, "cpu", per_depth_us=0.5)
    assert att.calibrated_us == 0.0


def test_left_out_steps_are_not_in_the_figures_but_keep_their_trace_lines():
    steps = [_nested_step(0, "ProfilerStep#1"), _nested_step(100, "ProfilerStep#2")]
    steps[0].cpu_children[0].cpu_children[0].time_range.end = 91  # a preempted step: 90 µs
    events = _flatten(steps)
    att = attribute(events, LABELS, False, None, "cpu", keep=[False, True], record_events=True)
    assert att.steps == 1 and att.recorded_steps == 2
    assert att.line_self[(0, L3, FWD)] == pytest.approx(10.0)
    ops = [e for e in events if e.name.startswith("aten::")]
    assert all(e.id in att.event_lines for e in ops)  # both steps tagged for the trace
    # a keep list of the wrong length is ignored (all steps used)
    assert attribute(events, LABELS, False, None, "cpu", keep=[True]).steps == 2


def test_figures_are_per_call_when_a_step_makes_several_calls():
    att = attribute(_flatten([_nested_step(0)]), LABELS, False, None, "cpu", calls_per_step=4)
    fig = lines_and_ops(att, LABELS, _NoSource())
    (line,) = fig["lines"]
    assert line["self_time_us"] == pytest.approx(10.0 / 4) and line["calls"] == pytest.approx(0.25)
    assert fig["per_step"] == [pytest.approx(2.5)] and line["step_us"] == [pytest.approx(2.5)]


def test_compiled_backward_is_measured_and_lands_on_the_line_that_called_the_model():
    # forward: line 4 calls the compiled model; AOTAutograd's CompiledFunction range
    # (sequence_nr 21) sits in the region; line 8 calls backward()
    fwd_mm = _Ev("aten::addmm", 3, 5)
    cf = _Ev("CompiledFunction", 2, 9, [_Ev("## Call CompiledFxGraph a ##", 2.5, 8.5, [fwd_mm])], seq=21)
    region = _Ev("Torch-Compiled Region: 0/0", 1, 10, [cf])
    bwd_mm = _Ev("aten::mm", 22, 26)
    node = _Ev(
        "CompiledFunctionBackward", 21, 40, [_Ev("## Call CompiledFxGraph b ##", 21.5, 39, [bwd_mm])], seq=21
    )
    engine = _Ev(
        "autograd::engine::evaluate_function: CompiledFunctionBackward", 20, 41, [node], seq=21, fwd_thread=1
    )
    step = _Ev("ProfilerStep#1", 0, 50, [_Ev(L4, 0.5, 10.5, [region]), _Ev(L8, 19, 45, [engine])])
    att = attribute(_flatten([step]), LABELS, False, None, "cpu")
    assert att.unlinked_nodes == 0
    # the node's own time (inductor kernels: no op events) is measured: 19 - 4 (mm)
    assert att.line_self[(0, L4, BWD)] == pytest.approx(19.0)
    assert att.line_self.get((0, L8, BWD), 0.0) == 0.0
    assert att.line_self[(0, L4, FWD)] == pytest.approx(9.0)
    name = "CompiledFunctionBackward (Torch-Compiled Region: 0/0)"
    assert att.regions[(name, L4)] == [1, pytest.approx(19.0), BWD]


class _NoSource:
    def line(self, _file, _line):
        return ""


def _paired_steps():
    """A labelled step and its plain twin: line 3 dispatches mul then add; in the
    twin, 6 µs of host time lie between them and an optimizer range before add."""

    def step(t0, name, labelled):
        mul = _Ev("aten::mul", t0 + 1, t0 + 3)
        add = _Ev("aten::add", t0 + 10, t0 + 12)
        opt = _Ev("Optimizer.step#SGD.step", t0 + 9, t0 + 13, [add])
        if labelled:
            kids = [_Ev(L3, t0 + 0.5, t0 + 3.5, [mul]), _Ev(L4, t0 + 8.5, t0 + 13.5, [opt])]
        else:
            kids = [mul, opt]
        return _Ev(name, t0, t0 + 14, kids)

    return [step(0, "ProfilerStep#1", True), step(100, "ProfilerStep#2", False)]


def test_host_time_between_ops_is_read_from_the_plain_twin_less_the_profilers_cost():
    events = _flatten(_paired_steps())
    att = attribute(events, LABELS, False, None, "cpu", paired=True, per_top_us=0.5, gap_factor=2.0)
    # the gap before add: 103 -> 110 = 7 µs, less the profiler's cost of add and of the
    # optimizer range (0.5 each), over the gap factor: (7 - 1) / 2
    assert att.line_host[(0, L4, FWD)] == pytest.approx(3.0)
    assert (0, L3, FWD) not in att.line_host  # before the first op: the call's entry
    fig = lines_and_ops(att, LABELS, _NoSource())
    assert fig["host_time_us"] == pytest.approx(3.0) and fig["host_measured"]
    # not read without calibration, or on an unpaired profile
    assert not attribute(events, LABELS, False, None, "cpu", paired=True).line_host
    assert not attribute(events, LABELS, False, None, "cpu", per_top_us=0.5).host_read


def test_gaps_between_backward_nodes_are_not_host_time():
    def step(t0, name, labelled):
        a = _Ev("aten::mm", t0 + 1, t0 + 3, seq=3)
        b = _Ev("aten::mm", t0 + 12, t0 + 14)
        n = _Ev(
            "autograd::engine::evaluate_function: MmBackward0", t0 + 11, t0 + 15, [b], seq=3, fwd_thread=1
        )
        kids = [_Ev(L3, t0 + 0.5, t0 + 3.5, [a]), _Ev(L8, t0 + 10, t0 + 16, [n])] if labelled else [a, n]
        return _Ev(name, t0, t0 + 20, kids)

    events = _flatten([step(0, "ProfilerStep#1", True), step(100, "ProfilerStep#2", False)])
    att = attribute(events, LABELS, False, None, "cpu", paired=True, per_top_us=0.0)
    assert att.line_self[(0, L3, BWD)] == pytest.approx(2.0)  # linked to its forward line
    assert not att.line_host  # the 8 µs before the backward op are not host time

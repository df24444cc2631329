"""The xla credit rules (harness/xla/credit.py) and the per-phase figures, on a
hand-built optimized module: source line, backward tag, fusion votes, calls,
data flow both ways (across a called computation's parameters), the
graph-plumbing bucket, and time nested in a call taken off it."""

from __future__ import annotations

import pytest

from tests.support.hlo_proto import computation, hlo_proto, instr, stack_index
from trainium_lens.harness.xla import attribution as xa
from trainium_lens.harness.xla import xplane as xt
from trainium_lens.harness.xla.credit import PLUMBING, Creditor
from trainium_lens.harness.xla.figures import figures as xla_figures
from trainium_lens.harness.xla.tags import TAG_PREFIX, tag_of

USER, LIB = "/ws/model.py", "/venv/lib/python3.11/site-packages/torch/nn/modules/linear.py"
L10, L20, L30 = ("model.py", 10, "step"), ("model.py", 20, "step"), ("model.py", 30, "step")
TAGS = {0: ([L20, L10], "MmBackward0"), 1: ([L30], "ReluBackward0")}
BWD0, BWD1 = f"{TAG_PREFIX}0/aten__mm", f"{TAG_PREFIX}1/aten__threshold_backward"


def relpath(name: str) -> str | None:
    return "model.py" if name == USER else None


def module() -> xt.HloModule:
    index = stack_index(
        [USER, LIB],
        ["step", "forward"],
        [(1, 1, 10), (1, 1, 20), (1, 1, 30), (2, 2, 134)],
        [(1, 0), (2, 0), (3, 0), (4, 1)],  # frame 4: linear.py:134 called from model.py:10
    )
    fused_bwd = computation(  # a fusion whose root has no metadata: 2 tagged, 1 forward line 20
        2,
        24,
        instr("b0", "parameter", 20, param=0),
        instr("b1", "multiply", 21, op_name=BWD0),
        instr("b2", "add", 22, op_name=BWD0),
        instr("b3", "negate", 23, frame=2),
        instr("b4", "convert", 24),
    )
    called = computation(  # what call.1 runs: a reduce-window split off, a fusion reading it
        3,
        33,
        instr("q0", "parameter", 30, param=0),
        instr("rw", "reduce-window", 31, operands=(30,)),
        instr("cv", "convert", 32, operands=(30,)),
        instr("fc.clone", "fusion", 33, frame=3, called=(4,), operands=(31,)),
    )
    fc_body = computation(
        4, 41, instr("r0", "parameter", 40, param=0), instr("m", "multiply", 41, 3, operands=(40,))
    )
    entry = computation(
        1,
        99,
        instr("p0", "parameter", 1, frame=1, param=0, op_type="xla__device_data"),
        instr("dot.1", "dot", 2, frame=4, op_type="aten__mm"),
        instr("dot.2", "dot", 3, op_name=BWD0),
        instr("dot.3", "dot", 4, frame=2, op_name=BWD1),  # a source line wins over a tag
        instr("fusion.1", "fusion", 5, called=(2,)),
        instr("call.1", "call", 6, called=(3,), operands=(2,)),
        instr("copy.1", "copy", 7, operands=(3,)),
        instr("copy.2", "copy", 8, operands=(1,)),
        instr("add.1", "add", 9, operands=(1, 1)),
        instr("tuple", "tuple", 99, operands=(7, 8, 9, 6)),
    )
    return xt.parse_hlo_proto(hlo_proto("SyncTensorsGraph.7", [fused_bwd, called, fc_body, entry], index))


def credits() -> dict[str, xa.Credit]:
    m = module()
    c = Creditor(m, relpath, TAGS.get)
    names = ("dot.1", "dot.2", "dot.3", "fusion.1", "call.1", "copy.1", "copy.2", "add.1", "rw", "cv")
    return {n: c.credit(m.instruction(n)) for n in names}  # type: ignore[arg-type]


def test_tag_ids_are_read_back_from_op_names():
    assert tag_of(f"{TAG_PREFIX}12/aten__mm") == 12
    assert tag_of("aten__mm") is None and tag_of(f"{TAG_PREFIX}x/aten__mm") is None
    assert tag_of("aten__mul.7/aten__mul") is None  # a torch-xla scope, not ours


def test_source_line_then_backward_tag():
    c = credits()
    assert (c["dot.1"].stack, c["dot.1"].phase, c["dot.1"].via) == ([L10], "forward", "source")
    bwd = c["dot.2"]
    assert (bwd.stack, bwd.phase, bwd.node, bwd.via) == ([L20, L10], "backward", "MmBackward0", "tag")
    assert (c["dot.3"].stack, c["dot.3"].phase) == ([L20], "forward")


def test_fusion_votes_over_line_and_phase_and_lists_forward_lines_covered():
    f = module_fusion = credits()["fusion.1"]
    assert (module_fusion.stack[0], f.phase, f.node, f.via) == (L20, "backward", "MmBackward0", "fusion")
    assert f.covered == [L20] and f.fused == 4


def test_a_call_takes_the_line_of_the_work_it_runs():
    c = credits()["call.1"]
    assert (c.stack, c.via) == ([L30], "call")


def test_data_flow_consumer_first_then_producer_across_a_called_computation():
    c = credits()
    assert (c["rw"].stack, c["rw"].via) == ([L30], "consumer")  # fc.clone reads it (via its parameter)
    assert (c["cv"].stack, c["cv"].via) == ([L10], "producer")  # q0 is call.1's operand: dot.1
    out = c["copy.1"]  # an output copy: the tuple has no line, the value came from dot.2
    assert (out.stack, out.phase, out.via) == ([L20, L10], "backward", "producer")


def test_plumbing_bucket_and_what_is_left_unattributed():
    c = credits()
    # a graph input copied to an output: its device-data frames say where the data was made
    assert (c["copy.2"].stack, c["copy.2"].bucket) == ([], PLUMBING)
    assert (c["add.1"].stack, c["add.1"].bucket) == ([], "")  # computes, reaches no line


def test_time_nested_in_a_call_is_taken_off_it_and_phases_add_up():
    m = module()
    cap = xt.Capture(modules={7: m})
    main, other = "tf_XLAEigen/1", "tf_XLAEigen/2"

    def ev(start, end, op, thread=main):
        return xt.Executed(start, end, op, "SyncTensorsGraph.7", 7, thread)

    for base in (1_000_000, 2_000_000):
        cap.executed += [
            ev(base + 0, base + 10_000, "call.1"),
            ev(base + 1_000, base + 9_000, "fc.clone"),  # nested: 8 µs off call.1's 10
            ev(base + 2_000, base + 6_000, "rw", other),  # another thread: not nested
            ev(base + 11_000, base + 14_000, "dot.1"),
            ev(base + 14_000, base + 20_000, "dot.2"),
            ev(base + 20_000, base + 21_000, "copy.2"),
            ev(base + 21_000, base + 21_500, "add.1"),
        ]
    own = xa.own_intervals(cap.executed[:3])
    assert own[0] == [(1_000_000, 1_001_000), (1_009_000, 1_010_000)] and own[1] == [(1_001_000, 1_009_000)]
    places = {L10: "Optimizer.step#SGD.step"}  # say line 10 called an optimizer step
    att = xa.attribute(
        cap, [900_000.0, 1_900_000.0], relpath, TAGS.get, places, {"Optimizer.step#SGD.step": 2}
    )
    fig = xla_figures(att, lambda f, n: f"line {n}")
    lines = {s["line"]: s for s in fig["lines"]}
    assert lines[30]["self_time_us"] == pytest.approx(2 + 8 + 4)  # call.1's own 2, fc.clone 8, rw 4
    assert lines[20]["backward_self_time_us"] == pytest.approx(6) and lines[20]["self_time_us"] == 0
    assert lines[10]["backward_total_time_us"] == pytest.approx(6)  # line 10 called line 20's helper
    assert lines[20]["backward_ops"][0]["node"] == "MmBackward0"
    assert [i["phase"] for i in lines[20]["instructions"] if i["credited"]] == ["backward"]
    assert fig["buckets"] == [
        {"name": PLUMBING, "self_time_us": 1.0, "calls": 1.0, "instructions": ["copy.2"]}
    ]
    assert fig["unattributed_us"] == pytest.approx(0.5)
    total = fig["self_time_us"]
    assert total == pytest.approx(14 + 3 + 6 + 1 + 0.5)
    assert fig["optimizer_time_us"] == pytest.approx(3)  # dot.1, forward on the optimizer's line
    assert fig["backward_time_us"] == pytest.approx(6)
    assert fig["forward_time_us"] + fig["backward_time_us"] + fig["optimizer_time_us"] == pytest.approx(total)
    assert fig["per_step"] == pytest.approx([total, total])
    [opt] = fig["optimizers"]
    assert (opt["line"], opt["calls"], opt["self_time_us"]) == (10, 1.0, pytest.approx(3))
    assert fig["dispatches"] == 0.0  # no eager dispatch count on a compiled graph


def test_lineless_fusions_in_calls_that_feed_each_other_end_without_a_line():
    """A graph traced without frames (no metadata anywhere): each fusion's data flow
    leads through the other's call and back; the rules must end, not recurse for ever
    (a script's graph compiled on a plain step did, before ``_with_line`` stopped asking
    a fused callee's neighbours)."""
    index = stack_index([USER], ["step"], [(1, 1, 10)], [(1, 0)])
    body_a = computation(
        7, 71, instr("a0", "parameter", 70, param=0), instr("am", "multiply", 71, operands=(70,))
    )
    body_b = computation(8, 81, instr("b0", "parameter", 80, param=0), instr("ba", "add", 81, operands=(80,)))
    call_a = computation(
        5, 51, instr("qa", "parameter", 50, param=0), instr("fA", "fusion", 51, called=(7,), operands=(50,))
    )
    call_b = computation(
        6, 61, instr("qb", "parameter", 60, param=0), instr("fB", "fusion", 61, called=(8,), operands=(60,))
    )
    entry = computation(
        1,
        99,
        instr("p0", "parameter", 1, param=0, op_type="xla__device_data"),
        instr("call.A", "call", 2, called=(5,), operands=(1,)),
        instr("call.B", "call", 3, called=(6,), operands=(2,)),
        instr("tuple", "tuple", 99, operands=(3,)),
    )
    m = xt.parse_hlo_proto(hlo_proto("SyncTensorsGraph.9", [body_a, body_b, call_a, call_b, entry], index))
    c = Creditor(m, relpath)
    for name in ("fA", "fB", "call.A", "call.B"):
        assert c.credit(m.instruction(name)).stack == []  # type: ignore[arg-type]

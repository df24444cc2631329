"""The xla backend's reader and line rules on hand-built protobuf bytes (no
torch_xla needed): the wire decoder, the stack walk, the fusion rule, the
consumer rule for instructions without metadata, union of partition intervals."""

from __future__ import annotations

from tests.support.hlo_proto import f_bytes, f_int, instr
from trainium_lens.harness.xla import attribution as xa
from trainium_lens.harness.xla import xplane as xt
from trainium_lens.harness.xla.figures import figures as xla_figures

USER = "/ws/model.py"
LIB = "/venv/lib/python3.10/site-packages/torch/nn/modules/linear.py"


def module_bytes() -> bytes:
    """Frames: 1 = linear.py:134 → parent 2 = model.py:10 (caller) ; 3 = model.py:20 →
    parent 2; 4 = model.py:30. Entry: dot (frame 1), a fusion whose root has no
    metadata but fuses lines 20, 20, 30; a reduce-window without metadata read by
    fusion.2's parameter 0, whose reader is at line 30."""
    index = (
        f_bytes(1, USER)
        + f_bytes(1, LIB)
        + f_bytes(2, "forward")
        + f_bytes(2, "step")
        + f_bytes(3, f_int(1, 2) + f_int(2, 1) + f_int(3, 134))  # loc 1: linear.py:134
        + f_bytes(3, f_int(1, 1) + f_int(2, 2) + f_int(3, 10))  # loc 2: model.py:10
        + f_bytes(3, f_int(1, 1) + f_int(2, 2) + f_int(3, 20))  # loc 3: model.py:20
        + f_bytes(3, f_int(1, 1) + f_int(2, 2) + f_int(3, 30))  # loc 4: model.py:30
        + f_bytes(4, f_int(1, 1) + f_int(2, 2))  # frame 1 → 2
        + f_bytes(4, f_int(1, 2))  # frame 2 (outermost)
        + f_bytes(4, f_int(1, 3) + f_int(2, 2))  # frame 3 → 2
        + f_bytes(4, f_int(1, 4))
    )  # frame 4
    fused = (
        f_bytes(2, instr("p0", "parameter", 20, param=0))
        + f_bytes(2, instr("m", "multiply", 21, 3))
        + f_bytes(2, instr("a", "add", 22, 3))
        + f_bytes(2, instr("t", "tanh", 23, 4))
        + f_bytes(2, instr("root", "convert", 24))
        + f_int(5, 2)
        + f_int(6, 24)
    )
    fused2 = (
        f_bytes(2, instr("q0", "parameter", 30, param=0))
        + f_bytes(2, instr("r", "reduce", 31, 4, operands=(30,)))
        + f_int(5, 3)
        + f_int(6, 31)
    )
    entry = (
        f_bytes(2, instr("dot.1", "dot", 1, 1, op_type="aten__addmm"))
        + f_bytes(2, instr("fusion", "fusion", 2, called=(2,)))
        + f_bytes(2, instr("reduce-window", "reduce-window", 3, operands=(1,)))
        + f_bytes(2, instr("fusion.2", "fusion", 4, 4, called=(3,), operands=(3,)))
        + f_int(5, 1)
        + f_int(6, 4)
    )
    module = (
        f_bytes(1, "SyncTensorsGraph.9")
        + f_bytes(3, fused)
        + f_bytes(3, fused2)
        + f_bytes(3, entry)
        + f_bytes(17, index)
    )
    return f_bytes(1, module)  # HloProto.hlo_module


def relpath(name: str) -> str | None:
    return "model.py" if name == USER else None


def test_wire_decoder_reads_the_module_and_its_stack_index():
    module = xt.parse_hlo_proto(module_bytes())
    assert module.name == "SyncTensorsGraph.9" and module.file_names == [USER, LIB]
    assert module.stack_frames == [(1, 2), (2, 0), (3, 2), (4, 0)]
    dot = module.instruction("dot.1")
    assert dot is not None and dot.stack_frame_id == 1 and dot.op_type == "aten__addmm"
    assert module.instruction("fusion").called == [2]


def test_library_frames_are_walked_past_and_callers_get_total():
    module = xt.parse_hlo_proto(module_bytes())
    stack = xa.user_stack(module, 1, relpath)  # linear.py:134 → model.py:10
    assert stack == [("model.py", 10, "step")]
    assert xa.user_stack(module, 3, relpath) == [("model.py", 20, "step"), ("model.py", 10, "step")]
    assert xa.user_stack(module, 0, relpath) == []


def test_fusion_rule_majority_of_fused_lines_when_the_root_has_no_metadata():
    module = xt.parse_hlo_proto(module_bytes())
    fusion = module.instruction("fusion")
    assert fusion is not None
    c = xa.credit(module, fusion, relpath)
    assert c.stack[0] == ("model.py", 20, "step")  # 2 fused instructions on line 20, 1 on 30
    assert [p[1] for p in c.covered] == [20, 30] and c.fused == 4


def test_an_instruction_without_metadata_takes_the_line_that_reads_it():
    module = xt.parse_hlo_proto(module_bytes())
    window = module.instruction("reduce-window")
    assert window is not None
    c = xa.credit(module, window, relpath)
    assert c.stack == [("model.py", 30, "step")]  # fusion.2's reduce reads it via parameter 0


def test_steps_partitions_and_reconciliation():
    module = xt.parse_hlo_proto(module_bytes())
    cap = xt.Capture(modules={7: module})
    main, worker = "tf_XLAPjRtCpuClient/1", "tf_XLAEigen/2"
    for base in (1_000_000, 2_000_000):
        cap.executed += [
            xt.Executed(base + 0, base + 4000, "dot.1", "SyncTensorsGraph.9", 7, main),
            xt.Executed(base + 1000, base + 5000, "dot.1", "SyncTensorsGraph.9", 7, worker),  # partition
            xt.Executed(base + 6000, base + 7000, "fusion", "SyncTensorsGraph.9", 7, main),
            xt.Executed(base + 8000, base + 8500, "mystery", "Other.1", None, main),
        ]
    att = xa.attribute(cap, [900_000.0, 1_900_000.0], relpath)
    assert att.steps == 2 and att.unknown == {"mystery"}
    fig = xla_figures(att, lambda f, n: f"line {n}")
    lines = {s["line"]: s for s in fig["lines"]}
    assert lines[10]["self_time_us"] == 5.0  # union of [0,4] and [1,5] µs, not 8
    assert lines[10]["calls"] == 1  # the partition is not another execution
    assert lines[20]["self_time_us"] == 1.0 and lines[10]["total_time_us"] == 6.0  # 10 calls 20
    covered = [i for i in lines[30]["instructions"] if not i["credited"]]
    assert covered and covered[0]["name"] == "fusion" and covered[0]["line"] == 20
    total = sum(s["self_time_us"] for s in fig["lines"]) + fig["unattributed_us"]
    assert total == fig["self_time_us"] == 6.0
    assert fig["per_step"] == [6.0, 6.0]
    region = next(r for r in fig["regions"] if r["name"] == "fusion")
    assert region["line"] == 20 and [c["line"] for c in region["covered_lines"]] == [20, 30]


def test_user_places_walks_outwards_once_and_stops_at_a_cycle_or_an_unknown_id():
    from trainium_lens.harness.stacks import user_places

    # id: (place or None for library code, parent id)
    frames = {1: ("a.py:3", 2), 2: (None, 3), 3: ("a.py:3", 4), 4: ("b.py:9", 1), 5: ("c.py:1", 99)}
    assert user_places(1, frames.get) == ["a.py:3", "b.py:9"]  # 4 → 1: a cycle ends it
    assert user_places(5, frames.get) == ["c.py:1"]  # parent 99 unknown
    assert user_places(0, frames.get) == []

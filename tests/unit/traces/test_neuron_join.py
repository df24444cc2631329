"""TorchNeuron's exact op → execution join (traces/neuron_join.py, neuron_mapping.py)
on STAND-IN maps and traces (tests/support/neuron_mapping.py: the map in TorchNeuron's
schema, the trace as torch writes it; no Trainium here)."""

from __future__ import annotations

import json

import pytest

from tests.support.neuron_mapping import OS_TID, op, trace, write_mapping
from trainium_lens.traces import neuron_mapping
from trainium_lens.traces.neuron_export import NeuronProfileError
from trainium_lens.traces.neuron_join import Execution, host_ops, join

F = "/w/train.py"


def mapped(tmp_path, entries):
    write_mapping(tmp_path, entries)
    return neuron_mapping.read(tmp_path)


def lines(report):
    return {(place[1], phase): ns for (place, phase), ns in report.line_ns.items()}


def async_session():
    """linear (line 10, node 0: submits key 1) then relu (line 11, node 1: key 2). The
    device runs linear's execution after relu has begun on the host: by time it would
    be relu's."""
    ops = host_ops(
        trace(
            op("aten::linear", 0, 5, 10, seq=0),
            op("aten::addmm", 1, 3, 10, seq=0),
            op("aten::relu", 6, 4, 11, seq=1),
            op("aten::clamp_min", 7, 2, 11),
        )
    )
    execs = [Execution(101, 7_000, 20_000), Execution(102, 21_000, 25_000)]
    return ops, execs


def test_the_map_places_what_the_time_window_misplaces(tmp_path):
    ops, execs = async_session()
    window = join(ops, execs, None)
    assert window.join == "time-window" and "no framework_mapping" in window.reason
    assert lines(window) == {(11, "forward"): 13_000 + 4_000}  # both on relu: wrong
    exact = join(ops, execs, mapped(tmp_path, [(101, [(1, 1, 0)]), (102, [(2, 1, 0)])]))
    assert exact.join == "framework_mapping"
    assert lines(exact) == {(10, "forward"): 13_000, (11, "forward"): 4_000}
    assert exact.executions == {"exact": 2, "order": 0, "time": 0} and exact.unmatched == 0
    names = {ops[i].name: ns for i, ns in exact.op_ns.items()}
    assert names == {"aten::addmm": 13_000, "aten::relu": 4_000}  # the innermost op of its number
    assert "2 exact" in exact.summary() and "framework_mapping" in exact.summary()


def test_no_grad_ops_share_a_number_and_are_placed_in_submission_order(tmp_path):
    """relu took 1 (submits 2); then, under no_grad, mul and add submit 2 too: three
    executions name (2, thread 1). Runtime order pairs with the stretch's ops."""
    ops = host_ops(
        trace(
            op("aten::relu", 0, 4, 11, seq=1),
            op("aten::clamp_min", 1, 2, 11),
            op("aten::mul", 5, 2, 12),
            op("aten::add", 8, 2, 13),
            op("aten::sum", 11, 2, 14, seq=2),  # the next number: the stretch ends here
        )
    )
    execs = [Execution(7, 30_000, 31_000), Execution(8, 31_000, 33_000), Execution(9, 33_000, 36_000)]
    report = join(ops, execs, mapped(tmp_path, [(7, [(2, 1, 0)]), (8, [(2, 1, 0)]), (9, [(2, 1, 0)])]))
    assert lines(report) == {(11, "forward"): 1_000, (12, "forward"): 2_000, (13, "forward"): 3_000}
    assert report.executions["order"] == 3 and report.ns["order"] == 6_000
    # one more execution than ops in the stretch: the order is unknown, time decides
    report = join(
        ops,
        [*execs, Execution(10, 6_000, 6_400)],
        mapped(tmp_path, [(k, [(2, 1, 0)]) for k in (7, 8, 9, 10)]),
    )
    assert report.executions["time"] == 4 and report.executions["order"] == 0
    assert lines(report)[(12, "forward")] == 400  # started after mul, before add


def test_one_op_several_executions_and_ops_with_none(tmp_path):
    ops = host_ops(
        trace(
            op("aten::matmul", 0, 5, 20, seq=4),
            op("aten::view", 6, 1, 21),  # no device work: no execution names it
            op("aten::gelu", 8, 2, 22, seq=5),
        )
    )
    execs = [Execution(1, 10_000, 12_000), Execution(2, 12_000, 15_000), Execution(3, 15_000, 16_000)]
    report = join(ops, execs, mapped(tmp_path, [(1, [(5, 1, 0)]), (2, [(5, 1, 0)]), (3, [(6, 1, 0)])]))
    # key 5 is named twice and its stretch holds matmul and view: 2 and 2, in order
    assert lines(report) == {(20, "forward"): 2_000, (21, "forward"): 3_000, (22, "forward"): 1_000}
    alone = host_ops(trace(op("aten::matmul", 0, 5, 20, seq=4), op("aten::gelu", 8, 2, 22, seq=5)))
    report = join(alone, execs, mapped(tmp_path, [(1, [(5, 1, 0)]), (2, [(5, 1, 0)]), (3, [(6, 1, 0)])]))
    assert lines(report) == {(20, "forward"): 5_000, (22, "forward"): 1_000}
    assert report.executions["exact"] == 3
    report = join(alone, execs[:1], mapped(tmp_path, [(1, [(5, 1, 0)])]))
    assert report.ops_without_execution == 1  # gelu ran nothing the map names


def test_keys_are_per_torch_thread_and_each_thread_counts_from_zero(tmp_path):
    """Two threads both start at sequence number 0; th_id is PyTorch's counter (1, 2),
    not the OS thread id in the trace's tid."""
    ops = host_ops(
        trace(
            op("aten::mm", 0, 5, 30, seq=0, thread=1, tid=OS_TID),
            op("aten::mm", 1, 5, 40, seq=0, thread=2, tid=OS_TID + 7),
        )
    )
    execs = [Execution(1, 10_000, 11_000), Execution(2, 11_000, 14_000)]
    report = join(ops, execs, mapped(tmp_path, [(1, [(1, 2, 0)]), (2, [(1, 1, 0)])]))
    assert lines(report) == {(40, "forward"): 1_000, (30, "forward"): 3_000}
    # keyed by the OS tid it would find nothing: those executions are unmatched, not misplaced
    report = join(ops, execs, mapped(tmp_path, [(1, [(1, OS_TID, 0)]), (2, [(1, OS_TID, 0)])]))
    assert report.unmatched == 2 and report.unmatched_ns == 4_000 and not report.line_ns


def test_backward_concatenation_and_executions_the_map_does_not_name(tmp_path):
    ops = host_ops(
        trace(
            op("aten::mul", 0, 2, 50, seq=9),
            op("aten::add", 3, 2, 51, seq=10),
            op("aten::threshold_backward", 20, 2, 51, thread=3, phase="backward"),
        )
    )
    execs = [Execution(1, 5_000, 9_000), Execution(2, 22_000, 23_000), Execution(3, 1_000, 1_500)]
    # one execution ran mul and add together (concatenation); the backward op's thread
    # has no node numbers (grad is off in backward): its key's stretch is that op
    report = join(ops, execs, mapped(tmp_path, [(1, [(10, 1, 0), (11, 1, 0)]), (2, [(0, 3, 0)])]))
    assert lines(report) == {(50, "forward"): 2_000 + 500, (51, "forward"): 2_000, (51, "backward"): 1_000}
    assert report.executions == {"exact": 2, "order": 0, "time": 1}  # 3 is not in the map: by time


def test_a_trace_without_the_thread_tag_is_joined_by_time(tmp_path):
    ops = host_ops(trace(op("aten::mm", 0, 5, 30, seq=0, thread=None)))
    report = join(ops, [Execution(1, 6_000, 7_000)], mapped(tmp_path, [(1, [(1, 1, 0)])]))
    assert report.join == "time-window" and "Torch thread" in report.reason


@pytest.mark.parametrize(
    "doc, says",
    [
        ({"version": 2, "data": []}, "version 2"),
        ({"version": 1}, 'no "data" list'),
        ({"version": 1, "data": [{"nrta_seq_id": 1.0, "framework_op_exec_ids": []}]}, "nrta_seq_id is 1.0"),
        (
            {
                "version": 1,
                "data": [{"nrta_seq_id": 1, "framework_op_exec_ids": [{"seq_nr": 1, "th_id": -1}]}],
            },
            "unsigned",
        ),
        (
            {
                "version": 1,
                "data": [{"nrta_seq_id": 1, "framework_op_exec_ids": [{"seq_nr": True, "th_id": 1}]}],
            },
            "seq_nr is True",
        ),
        (
            {
                "version": 1,
                "data": [
                    {"nrta_seq_id": 1, "framework_op_exec_ids": [{"seq_nr": 1, "th_id": 1}]},
                    {"nrta_seq_id": 1, "framework_op_exec_ids": [{"seq_nr": 2, "th_id": 1}]},
                ],
            },
            "listed twice",
        ),
    ],
)
def test_a_map_off_the_schema_is_refused_whole(tmp_path, doc, says):
    (tmp_path / "framework_mapping_20261130_101500_123.json").write_text(json.dumps(doc))
    with pytest.raises(NeuronProfileError, match=says):
        neuron_mapping.read(tmp_path)


def test_the_map_reads_as_written_and_absent_is_none(tmp_path):
    assert neuron_mapping.read(tmp_path) is None
    write_mapping(tmp_path / "a", [(3, [(5, 1, 0), (6, 1, 2)])])
    got = neuron_mapping.read(tmp_path)
    assert got is not None and got.executions == {
        3: [neuron_mapping.OpKey(5, 1, 0), neuron_mapping.OpKey(6, 1, 2)]
    }
    (tmp_path / "a" / "framework_mapping_x.json").write_text("{")
    with pytest.raises(NeuronProfileError, match="cannot read"):
        neuron_mapping.read(tmp_path)


def test_a_real_torch_trace_carries_the_keys_the_map_uses(tmp_path):
    """Real torch.profiler on CPU: the harness's export tags each op with PyTorch's thread
    counter (FunctionEvent.thread), which torch's trace lacks (its tid is the OS thread);
    the join then finds the op a map keyed as TorchNeuron keys it (node number + 1)."""
    from types import SimpleNamespace

    import torch
    from torch.profiler import ProfilerActivity, profile

    from trainium_lens.harness.attribution.trace_tags import export_tagged

    w = torch.randn(8, 8, requires_grad=True)
    x = torch.randn(8, 8)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        torch.nn.functional.linear(x, w).relu()
    events = prof.events()
    att = SimpleNamespace(event_lines={e.id: ("k", 0) for e in events})
    path = tmp_path / "r.trace.json"
    export_tagged(prof, str(path), att, {"k": (F, 7)}, threads=True)
    data = json.loads(path.read_text())
    threads = {e.id: e.thread for e in events}
    cpu_ops = [e for e in data["traceEvents"] if e.get("cat") == "cpu_op"]
    assert cpu_ops and all(e["args"]["Torch thread"] == threads[e["args"]["External id"]] for e in cpu_ops)
    assert all(e["args"]["Torch thread"] != e["tid"] for e in cpu_ops)  # not the OS thread
    ops = host_ops(data)
    relu = next(e for e in events if e.name == "aten::relu")
    mapping = mapped(tmp_path / "map", [(1, [(relu.sequence_nr + 1, relu.thread, 0)])])
    report = join(ops, [Execution(1, ops[-1].end_ns + 1_000, ops[-1].end_ns + 3_000)], mapping)
    assert report.executions["exact"] == 1
    assert [ops[i].name for i in report.op_ns] == ["aten::relu"]


def test_the_trn2_check_in_support_md_is_python_and_collects_what_the_join_assumes():
    """docs/support.md's script cannot run here (no Trainium): it must at least be valid
    Python and collect each assumption the join makes (keys, threads, map, schema)."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[3] / "docs" / "support.md").read_text()
    [code] = re.findall(r"```python\n(.*?)```", text, re.S)
    compile(code, "trn_check.py", "exec")
    for needed in (
        "framework_mapping_",
        "e.sequence_nr",
        "e.thread",
        "--show-profile-schema",
        "--session-dir",
    ):
        assert needed in code, needed


def test_executions_of_steps_outside_the_trace_are_unmatched_not_misplaced(tmp_path):
    """The map spans the whole capture; the trace only the profiled steps (numbers 40-41
    here). A warm-up execution (key 3), one after the window (key 99), and one the map
    does not name that ran before every traced op are left unmatched."""
    ops = host_ops(trace(op("aten::mm", 100, 5, 60, seq=40), op("aten::add", 106, 2, 61, seq=41)))
    execs = [
        Execution(1, 1_000, 2_000),  # warm-up: key 3
        Execution(2, 110_000, 112_000),  # mm: key 41
        Execution(3, 112_000, 113_000),  # add: key 42
        Execution(4, 200_000, 210_000),  # after the window: key 99
        Execution(5, 50_000, 51_000),  # not in the map, before every op
    ]
    report = join(
        ops,
        execs,
        mapped(tmp_path, [(1, [(3, 1, 0)]), (2, [(41, 1, 0)]), (3, [(42, 1, 0)]), (4, [(99, 1, 0)])]),
    )
    assert lines(report) == {(60, "forward"): 2_000, (61, "forward"): 1_000}
    assert report.executions["exact"] == 2 and report.unmatched == 3 and report.unmatched_ns == 12_000

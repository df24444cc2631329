"""Self vs total through user helpers, loops, recursion, nn.Module calls and
user print output, on the real torch.profiler (tests/data/helpers.py)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import DATA
from tests.support.harness import line_of, run_harness
from trainium_lens.model.result import Batch

FILE = "helpers.py"


@pytest.fixture(scope="module")
def helpers(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("helpers") / "run"
    code, events, stderr = run_harness(DATA, FILE, run_dir, protocol={"timing_calls": 3})
    assert code == 0, stderr[-3000:] + json.dumps(events[-2:])
    batch = Batch.from_dict(json.loads((run_dir / "batch.json").read_text()))
    return {"events": events, "stderr": stderr, "results": {r.function.name: r for r in batch.results}}


def at(result, tag):
    return result.line(FILE, line_of(DATA / FILE, tag))


def test_helper_self_on_helper_lines_total_on_both_call_lines(helpers):
    r = helpers["results"]["two_calls"]
    mul, add = at(r, "HELPER-MUL"), at(r, "HELPER-ADD")
    call1, call2, sub = at(r, "CALL-1"), at(r, "CALL-2"), at(r, "# SUB")
    # once per call line (a Python float operand adds nested aten::to copies)
    assert {o.name: o.calls for o in mul.ops}["aten::mul"] == 2
    assert {o.name: o.calls for o in add.ops}["aten::add"] == 2
    assert "aten::add" not in {o.name for o in mul.ops}
    assert mul.calls == 2 and add.calls == 2
    # the call lines dispatch nothing themselves: all of their time is total
    for call in (call1, call2):
        assert call.self_time_us == 0 and call.calls == 0 and call.total_time_us > 0
    assert call1.total_time_us + call2.total_time_us == pytest.approx(
        mul.self_time_us + add.self_time_us, rel=1e-6
    )
    assert sub.calls == 1 and sub.self_time_us == pytest.approx(sub.total_time_us)
    assert mul.function == "scale" and call1.function == "two_calls"
    assert r.unattributed_us == 0
    assert r.totals.dispatches == 5


def test_ops_in_a_loop_counted_per_call(helpers):
    r = helpers["results"]["loop"]
    add = at(r, "LOOP-ADD")
    assert add.calls == 4 and {o.name: o.calls for o in add.ops}["aten::add"] == 4
    # the marker option honoured: 3 steps wanted; the steps used are the clean ones among
    # them (harness/eager/steady.py), fewer on a loaded host, whose waits are not the code's
    assert r.function.protocol.active == 3 and r.stability is not None and r.stability.steps_wanted == 3
    assert 1 <= r.totals.steps <= 3


def test_recursion_counts_each_op_once_per_line(helpers):
    r = helpers["results"]["recursive"]
    neg, call, top = at(r, "RECURSE-NEG"), at(r, "RECURSE-CALL"), at(r, "RECURSE-TOP")
    assert neg.calls == 1 and neg.self_time_us > 0
    # the recursive call line is on the chain twice, yet counts the op once
    assert call.total_time_us == pytest.approx(neg.self_time_us)
    assert top.total_time_us == pytest.approx(neg.self_time_us)


def test_module_forward_through_torch_frames(helpers):
    r = helpers["results"]["through_module"]
    fwd, call = at(r, "MODULE-FWD"), at(r, "MODULE-CALL")
    names = {o.name for o in fwd.ops}
    assert "aten::linear" in names and "aten::relu" in names
    assert fwd.calls == 2 and call.total_time_us == pytest.approx(fwd.self_time_us)
    assert call.self_time_us == 0


def test_user_print_becomes_output_events(helpers):
    texts = [e["text"] for e in helpers["events"] if e["event"] == "output"]
    assert "hello from user code" in texts
    assert "MAIN BLOCK RAN" not in texts
    # a write to fd 1 from C code goes to stderr (every stdout line parsed as JSON)
    assert "raw write to fd 1" in helpers["stderr"]

"""TorchNeuron's exact join end to end on the core side: NeuronConfig's folder with
``framework_mapping_<ts>.json`` → the harness's view (the map carried into it) → the
core joins each execution to its op through the map and the run's tagged trace →
the lines' device time, and the result says which join placed how much.

STAND-INS (no Trainium, no TorchNeuron, no neuron-explorer here): the map in
TorchNeuron's schema (tests/support/neuron_mapping.py), the session folder and the
explorer of tests/integration/harness/test_neuron_device.py, whose ``ExecutionInfo``
carries each execution's ``nrta_seq_id`` — the one column whose place in a real
export is not documented (docs/neuron.md, "The exact join"). The harness's and the
core's code is real.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.harness.test_neuron_device import (
    DATA_FILE,
    STEPS,
    backend_for,
    data_lines,
    neuron_result,
    session_spec,
    write_session,
)
from tests.support.harness import HarnessStandIn
from tests.support.neuron_explorer import install_standin
from tests.support.neuron_mapping import label, op, trace, write_mapping
from trainium_lens.engine.runner import profile
from trainium_lens.model.job import Job
from trainium_lens.traces.neuron_join import Execution, host_ops, join

REL = "tests/data/xla_lines.py"


def async_steps() -> tuple[dict, list[dict], list]:
    """Per step, four ops on PyTorch thread 1, each taking the next node number: the
    helper's matmul (line HELPER), relu (CALL-2), the helper's matmul again, add
    (ADD). The device runs each matmul after the next op has begun on the host: by
    time, the first matmul's 4 µs would go to relu and the second's 3.5 µs to add."""
    at = data_lines()
    events, execs, entries = [], [], []
    for k in range(STEPS):
        t, n, s = k * 100.0, 4 * k, k * 100_000
        events += [
            label(REL, at["call1"], "two_calls", t + 0, 3.5),
            label(REL, at["helper"], "project", t + 0, 3.2),
            op("aten::mm", t + 0, 3, at["helper"], seq=n, file=REL),
            label(REL, at["call2"], "two_calls", t + 4, 5.5),
            op("aten::relu", t + 4, 2, at["call2"], seq=n + 1, file=REL),
            label(REL, at["helper"], "project", t + 7, 2.2),
            op("aten::mm", t + 7, 2, at["helper"], seq=n + 2, file=REL),
            label(REL, at["add"], "two_calls", t + 10, 1.5),
            op("aten::add", t + 10, 1, at["add"], seq=n + 3, file=REL),
        ]
        spans = [(5_000, 9_000), (9_000, 9_500), (10_500, 14_000), (14_000, 14_600)]
        for j, (a, b) in enumerate(spans):
            execs.append(
                {"neff": f"neff_1{j}_vnc_0.neff", "start": s + a, "end": s + b, "nrta_seq_id": n + j}
            )
            entries.append((n + j, [(n + j + 1, 1, 0)]))  # submitted after the node took n + j
    return trace(*events), execs, entries


def run(tmp_path: Path, monkeypatch, with_map: bool, version: int = 1):
    install_standin(tmp_path, monkeypatch)
    src, run_dir = DATA_FILE.parents[2], tmp_path / "run"
    backend = backend_for(run_dir)
    events, execs, entries = async_steps()
    session = write_session(
        Path(backend.profile_dir or ""), {**session_spec(str(DATA_FILE)), "executions": execs}
    )
    if with_map:
        path = write_mapping(session, entries)
        path.write_text(json.dumps({**json.loads(path.read_text()), "version": version}))
    views = backend.device_views(str(run_dir), "b1-0", STEPS)["neuron_views"]
    trace_path = run_dir / "b1-0.trace.json"
    trace_path.write_text(json.dumps(events))
    doc = neuron_result(src, run_dir, views)
    doc["artifacts"]["trace"] = str(trace_path)
    [result] = profile(Job(src, REL), HarnessStandIn([doc], fetch=False))
    return result, events, execs


def test_the_map_places_each_execution_on_the_op_that_submitted_it(tmp_path, monkeypatch):
    result, events, execs = run(tmp_path, monkeypatch, with_map=True)
    copied = list(
        (Path(result.artifacts.neuron_views[0].parquet or "") / "framework_mapping").rglob("*.json")
    )
    assert len(copied) == 1  # the harness carried the map into the view
    at = data_lines()
    got = {s.line: s for s in result.lines if s.file == REL}
    assert result.clock == "neuron"
    assert got[at["helper"]].self_time_us == pytest.approx(4.0 + 3.5)  # per step
    assert got[at["call2"]].self_time_us == pytest.approx(0.5)
    assert got[at["add"]].self_time_us == pytest.approx(0.6)
    # through the stack: the line ranges open around each op (CALL-1 runs the first
    # matmul, CALL-2 relu and the second)
    assert got[at["call1"]].self_time_us == 0.0 and got[at["call1"]].total_time_us == pytest.approx(4.0)
    assert got[at["call2"]].total_time_us == pytest.approx(0.5 + 3.5)
    assert got[at["helper"]].total_time_us == pytest.approx(7.5)
    assert result.totals.self_time_us == pytest.approx(8.6) and result.unattributed_us == 0.0
    note = next(w for w in result.signals.warnings if "joined to ops" in w)
    assert "framework_mapping" in note and f"{4 * STEPS} executions, {4 * STEPS} exact" in note
    assert "0 unmatched" in note
    # the same session joined by time alone puts the matmuls' time on relu and add
    window = join(host_ops(events), [Execution(e["nrta_seq_id"], e["start"], e["end"]) for e in execs], None)
    by_line = {place[1]: ns / STEPS / 1000 for (place, _p), ns in window.line_ns.items()}
    assert by_line[at["call2"]] == pytest.approx(4.0) and by_line[at["add"]] == pytest.approx(3.5 + 0.6)


def test_without_a_map_the_stack_frames_stay_and_the_result_says_so(tmp_path, monkeypatch):
    result, _events, _execs = run(tmp_path, monkeypatch, with_map=False)
    at = data_lines()
    got = {s.line: s for s in result.lines if s.file == REL}
    assert result.clock == "neuron"
    assert got[at["helper"]].self_time_us == pytest.approx(0.5)  # the stand-in's frames, as before
    assert any("wrote no framework_mapping" in w and "stack frames" in w for w in result.signals.warnings)


def test_a_map_off_the_schema_leaves_the_stack_frames_and_says_why(tmp_path, monkeypatch):
    result, _events, _execs = run(tmp_path, monkeypatch, with_map=True, version=7)
    at = data_lines()
    assert result.clock == "neuron"
    assert result.line(REL, at["helper"]).self_time_us == pytest.approx(0.5)
    note = next(w for w in result.signals.warnings if "op map not used" in w)
    assert "version 7" in note and "stack frames" in note

"""The Neuron device-profile reader on fixtures built from the documented schema.

Stand-ins: no Trainium and no neuron-explorer here, so the Parquet tables and the
legacy JSON are written by the tests, column for column as the Neuron Explorer
docs describe them (docs/xla.md, "Device time on Trn1").
"""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from trainium_lens.traces import neuron_profile as npf

USER = "/home/me/proj/model.py"
LIB = "/opt/venv/lib/python3.10/site-packages/torch/nn/modules/linear.py"


def write_tables(folder, instructions, schema="7.4"):
    """Stack: frame 1 = linear.py:125 (library) → parent 2 = model.py:10 (user);
    frame 3 = model.py:11 (user, no parent); frame 4 = model.py:12."""
    folder.mkdir(parents=True, exist_ok=True)
    tables = {
        "StackFrameFileName": {"id": [1, 2], "name": [LIB, USER]},
        "StackFrameFunctionName": {"id": [1, 2], "name": ["forward", "step"]},
        "StackFrameFileLocation": {
            "id": [1, 2, 3, 4],
            "file_name_id": [1, 2, 2, 2],
            "function_name_id": [1, 2, 2, 2],
            "line_number": [125, 10, 11, 12],
        },
        "StackFrame": {"id": [1, 2, 3, 4], "file_location_id": [1, 2, 3, 4], "parent_frame_id": [2, 0, 0, 0]},
    }
    for name, cols in tables.items():
        pq.write_table(pa.table(cols), folder / f"{name}.parquet")
    cols = {k: [r[k] for r in instructions] for k in instructions[0]}
    table = pa.table(
        cols,
        schema=pa.schema(
            [
                ("start_ts", pa.int64()),
                ("end_ts", pa.int64()),
                ("duration_ns", pa.int64()),
                ("engine", pa.string()),
                ("opcode", pa.string()),
                ("hlo_name", pa.string()),
                ("stack_frame_ids", pa.list_(pa.int64())),
                ("layer", pa.string()),
                ("bir_id", pa.int64()),
            ],
            metadata={"schema_version": schema} if schema else None,
        ),
    )
    pq.write_table(table, folder / "Instruction.parquet")
    return folder


def ins(start, end, engine, name, frames, opcode="MATMUL"):
    return {
        "start_ts": start,
        "end_ts": end,
        "duration_ns": end - start,
        "engine": engine,
        "opcode": opcode,
        "hlo_name": name,
        "stack_frame_ids": frames,
        "layer": "",
        "bir_id": 0,
    }


def test_overlapping_engines_give_the_union_not_the_sum(tmp_path):
    folder = write_tables(
        tmp_path / "p",
        [
            ins(0, 100, "pe", "dot.1", [1]),  # library frame → first user frame: line 10
            ins(50, 150, "act", "dot.1", [1]),  # same line, other engine, overlapping 50 ns
            ins(200, 260, "pool", "add.2", [3]),  # line 11
        ],
    )
    profile = npf.read(folder)
    assert profile.schema == "7.4" and len(profile.instructions) == 3
    report = npf.line_times(profile)
    by_line = {(t.file, t.line): t for t in report.lines}
    ten = by_line[(USER, 10)]
    assert ten.time_ns == 150  # union of [0,100] and [50,150]; the durations sum to 200
    assert ten.engines == {"act": 100, "pe": 100} and ten.instructions == 2
    assert by_line[(USER, 11)].time_ns == 60
    assert report.busy_ns == 210 and report.unattributed_ns == 0
    assert (LIB, 125) not in by_line  # library frames are walked past, never credited
    # per engine, the lines' times add up to the engine's busy time
    for engine, busy in report.busy_engines.items():
        assert sum(t.engines.get(engine, 0) for t in report.lines) == busy


def test_a_fused_instruction_is_credited_to_one_line_and_covers_the_others(tmp_path):
    folder = write_tables(
        tmp_path / "p",
        [
            ins(0, 40, "act", "fusion.3", [3, 4], "ACT"),  # tie: the frame listed first (line 11)
            ins(40, 70, "act", "fusion.4", [4, 1, 2], "ACT"),  # lines 12, 10, 10: most frames → 10
        ],
    )
    report = npf.line_times(npf.read(folder))
    got = {t.line: (t.time_ns, t.hlo_names, t.covered) for t in report.lines}
    assert got == {
        11: (40, ["fusion.3"], []),
        12: (0, [], ["fusion.3", "fusion.4"]),
        10: (30, ["fusion.4"], []),
    }
    assert report.busy_ns == 70 == sum(t.time_ns for t in report.lines)


def test_instructions_without_frames_reach_lines_through_the_hlo_metadata(tmp_path):
    folder = write_tables(tmp_path / "p", [ins(0, 30, "pe", "dot.7", [])])
    report = npf.line_times(npf.read(folder), hlo_lines={"dot.7": ("model.py", 22)})
    assert [(t.file, t.line, t.time_ns) for t in report.lines] == [("model.py", 22, 30)]
    report = npf.line_times(npf.read(folder))  # no way to a line: unattributed, not lost
    assert report.lines == [] and report.unattributed_ns == 30 == report.busy_ns


def test_legacy_json_hlo_text_names_and_union(tmp_path):
    path = tmp_path / "profile.json"
    path.write_text(
        json.dumps(
            {
                "instruction": [
                    {
                        "timestamp": 1000,
                        "duration": 100,
                        "label": "pe",
                        "opcode": "MATMUL",
                        "hlo_name": "%dot.1 = f32[4,4]{1,0} dot(f32[4,4] %a, f32[4,4] %b)",
                        "operands": "",
                    },
                    {
                        "timestamp": 1050,
                        "duration": 100,
                        "label": "act",
                        "opcode": "ACT",
                        "hlo_name": "ROOT %add.2 = f32[4] add(%x, %y)",
                        "operands": "",
                    },
                ]
            }
        )
    )
    profile = npf.read(path)
    assert [i.hlo_name for i in profile.instructions] == ["dot.1", "add.2"]
    report = npf.line_times(profile, hlo_lines={"dot.1": ("m.py", 3), "add.2": ("m.py", 3)})
    assert [(t.line, t.time_ns, t.engines) for t in report.lines] == [(3, 150, {"act": 100, "pe": 100})]
    assert report.busy_ns == 150


def test_unknown_schema_version_fails_visibly(tmp_path):
    folder = write_tables(tmp_path / "p", [ins(0, 1, "pe", "dot.1", [3])], schema="9.0")
    with pytest.raises(npf.NeuronProfileError, match=r"schema 9\.0 is not one this reader knows"):
        npf.read(folder)
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"version": "8.1", "instruction": []}))
    with pytest.raises(npf.NeuronProfileError, match="schema 8.1"):
        npf.read(path)


def test_missing_tables_and_columns_fail_with_one_line(tmp_path):
    folder = write_tables(tmp_path / "p", [ins(0, 1, "pe", "dot.1", [3])])
    pq.write_table(pa.table({"start_ts": [0], "end_ts": [1]}), folder / "Instruction.parquet")
    with pytest.raises(npf.NeuronProfileError, match="lacks column.*engine"):
        npf.read(folder)
    (folder / "Instruction.parquet").unlink()
    with pytest.raises(npf.NeuronProfileError, match="no Instruction table"):
        npf.read(folder)
    bad = tmp_path / "x.json"
    bad.write_text('{"events": []}')
    with pytest.raises(npf.NeuronProfileError, match='no "instruction" list'):
        npf.read(bad)


def test_frame_walk_is_one_based_and_stops_at_zero():
    frames = {1: npf.Frame(LIB, "f", 1, 2), 2: npf.Frame(LIB, "g", 2, 0)}
    assert npf.user_frame(frames, 1, lambda f: not npf.is_library(f)) is None
    frames[2] = npf.Frame(USER, "g", 7, 1)  # a cycle must not hang
    assert npf.user_frame(frames, 1, lambda f: not npf.is_library(f)) == (USER, 7)
    assert npf.user_frame(frames, 0, lambda f: True) is None


def test_outer_user_frames_get_total_time(tmp_path):
    """frame 1 (library) → 2 (model.py:10): a helper line called from line 10 gets self,
    line 10 gets total, through the stack."""
    folder = write_tables(tmp_path / "p", [ins(0, 10, "pe", "dot.1", [1])])
    profile = npf.read(folder)
    profile.frames[5] = npf.Frame(USER, "helper", 30, 2)  # helper line 30, called from line 10
    profile.instructions.append(npf.Instruction(20, 25, "pe", "ADD", "add.9", [5]))
    got = {t.line: (t.time_ns, t.total_ns) for t in npf.line_times(profile).lines}
    assert got == {10: (10, 15), 30: (5, 5)}

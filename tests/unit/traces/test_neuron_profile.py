"""The Neuron device-profile reader on exports written from the schema reference.

Stand-ins: no Trainium and no neuron-explorer here, so the Parquet exports are
written by ``tests/support/neuron_fixtures.py`` (schema 7.4.0 and 12.0.1 layouts,
each saying where it comes from) and the legacy JSON by the test itself.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.support import neuron_fixtures as fx
from trainium_lens.traces import neuron_lines as nl
from trainium_lens.traces import neuron_profile as npf

USER = "/home/me/proj/model.py"
LIB = fx.LIB


def figures(report: nl.LineReport) -> dict:
    """Everything the report says per line, for comparing two exports."""
    return {
        (t.file, t.line): (
            t.time_ns,
            t.total_ns,
            t.engines,
            t.hlo_names,
            t.covered,
            t.work,
            t.total_work,
        )
        for t in report.lines
    }


@pytest.mark.parametrize("schema", ["7.4.0", "12.0.1"])
def test_each_schema_gives_the_documented_figures(tmp_path, schema):
    folder = fx.write(tmp_path / schema, fx.sample(USER), schema)
    if schema == "12.0.1":  # the split table really is split
        assert sorted(p.name for p in folder.glob("Instruction*")) == [
            "Instruction_0.parquet",
            "Instruction_1.parquet",
        ]
    profile = npf.read(folder)
    assert profile.schema == schema and len(profile.instructions) == 5
    report = nl.line_times(profile)
    by_line = {t.line: t for t in report.lines}
    ten = by_line[10]
    assert ten.time_ns == 150  # union of pe [0,100] and act [50,150]; durations sum to 200
    assert ten.engines == {"act": 100, "pe": 100} and ten.hlo_names == ["dot.1"]
    assert ten.covered == ["fusion.2"]  # fusion.2's frames: line 30 (first listed) and 10
    assert by_line[30].time_ns == 20 and by_line[11].total_ns == 20 and by_line[11].time_ns == 0
    assert (LIB, 125) not in {(t.file, t.line) for t in report.lines}  # library frames walked past
    assert report.unattributed_ns == 30 and report.busy_ns == 230  # copy.4 has no frame
    for engine, busy in report.busy_engines.items():  # per engine, lines + unattributed = busy
        lines = sum(t.engines.get(engine, 0) for t in report.lines)
        assert lines + report.unattributed_engines.get(engine, 0) == busy
    # work: summed (not a union), with the same credit rule as time
    assert ten.work == {
        "raw_flops": 2 * 64**3,
        "adjusted_flops": 4 * 64**3,
        "hbm_read_bytes": 32768,
        "hbm_write_bytes": 16384 + 512,
        "spill_save_bytes": 0,
        "spill_reload_bytes": 0,
    }
    assert ten.total_work["raw_flops"] == 2 * 64**3 + 4096  # the fusion passes through line 10
    assert by_line[30].work["spill_save_bytes"] == 256 and by_line[12].work["spill_reload_bytes"] == 256
    assert report.unattributed_work["hbm_read_bytes"] == 1024
    for name in fx.WORK_NAMES:
        credited = sum(t.work[name] + t.backward_work.get(name, 0) for t in report.lines)
        assert credited + report.unattributed_work[name] == report.work[name]


def test_7_4_0_and_12_0_1_give_the_same_per_line_figures_for_the_same_instructions(tmp_path):
    old = nl.line_times(npf.read(fx.write(tmp_path / "a", fx.sample(USER), "7.4.0")))
    new = nl.line_times(npf.read(fx.write(tmp_path / "b", fx.sample(USER), "12.0.1")))
    assert figures(old) == figures(new) and len(figures(new)) == 4
    assert (old.busy_ns, old.unattributed_ns, old.work) == (new.busy_ns, new.unattributed_ns, new.work)
    assert (old.schema, new.schema) == ("7.4.0", "12.0.1")


@pytest.mark.parametrize(
    "drop, named",
    [
        ("Instruction.engine", "Instruction.engine"),
        ("Instruction.start_ts", "Instruction.start_ts"),
        ("StackFrame.parent_frame_id", "StackFrame.parent_frame_id"),
        ("StackFrameFileLocation.line_number", "StackFrameFileLocation.line_number"),
    ],
)
def test_a_missing_needed_column_is_one_line_naming_it(tmp_path, drop, named):
    folder = fx.write(tmp_path / "p", fx.sample(USER), "12.0.1", drop=(drop,))
    with pytest.raises(npf.NeuronProfileError) as err:
        npf.read(folder)
    text = str(err.value)
    assert "\n" not in text and f"no column {named}" in text
    assert "schema 12.0.1" in text and "its SchemaFields lists it, the table lacks it" in text


def test_end_or_duration_and_frames_or_names_are_needed_one_of_each(tmp_path):
    both = ("Instruction.end_ts", "Instruction.duration_ns")
    folder = fx.write(tmp_path / "a", fx.sample(USER), "7.4.0", drop=both)
    with pytest.raises(npf.NeuronProfileError, match=r"no column Instruction\.end_ts.*\(nor duration_ns\)"):
        npf.read(folder)
    # end_ts alone gone: the duration gives it
    only = fx.write(tmp_path / "b", fx.sample(USER), "7.4.0", drop=("Instruction.end_ts",))
    assert [i.end_ns for i in npf.read(only).instructions] == [100, 150, 170, 200, 230]
    lines = ("Instruction.stack_frame_ids", "Instruction.hlo_name")
    folder = fx.write(tmp_path / "c", fx.sample(USER), "7.4.0", drop=lines)
    with pytest.raises(npf.NeuronProfileError, match=r"stack_frame_ids.*\(nor hlo_name\)"):
        npf.read(folder)


def test_absent_work_columns_are_absent_not_zero_and_any_schema_version_is_read(tmp_path):
    folder = fx.write(tmp_path / "p", fx.sample(USER), "7.4.0", drop=("Instruction.adjusted_flops",))
    meta = pq.read_table(folder / "Metadata.parquet").to_pydict()
    meta["profile_schema_version"] = ["31.2.0"]  # a future major: read, not refused
    pq.write_table(pa.table(meta), folder / "Metadata.parquet")
    profile = npf.read(folder)
    assert profile.schema == "31.2.0" and "adjusted_flops" not in profile.work_fields
    report = nl.line_times(profile)
    assert report.work_fields == profile.work_fields and "adjusted_flops" not in report.work
    assert report.busy_ns == 230


def set_unit(folder: Path, table: str, column: str, unit: str) -> None:
    rows = pq.read_table(folder / "SchemaFields.parquet").to_pylist()
    for row in rows:
        if (row["table_name"], row["field_name"]) == (table, column):
            row["field_unit"] = unit
    pq.write_table(pa.Table.from_pylist(rows), folder / "SchemaFields.parquet")


def test_time_columns_go_through_the_unit_the_export_declares(tmp_path):
    folder = fx.write(tmp_path / "p", fx.sample(USER), "12.0.1")
    for column in ("start_ts", "end_ts"):
        set_unit(folder, "Instruction", column, "microseconds")
    report = nl.line_times(npf.read(folder))
    assert report.busy_ns == 230_000  # the same profile, read as µs
    set_unit(folder, "Instruction", "start_ts", "ticks")
    with pytest.raises(npf.NeuronProfileError, match=r"Instruction\.start_ts is in 'ticks'"):
        npf.read(folder)


def test_instructions_without_frames_reach_lines_through_the_hlo_metadata(tmp_path):
    profile = {"files": [USER], "frames": [[1, 5, 0]], "instructions": [[0, 30, "pe", "dot.7", [], {}]]}
    folder = fx.write(tmp_path / "p", profile, "7.4.0")
    report = nl.line_times(npf.read(folder), hlo_lines={"dot.7": ("model.py", 22)})
    assert [(t.file, t.line, t.time_ns) for t in report.lines] == [("model.py", 22, 30)]
    report = nl.line_times(npf.read(folder))  # no way to a line: unattributed, not lost
    assert report.lines == [] and report.unattributed_ns == 30 == report.busy_ns


def test_phases_split_a_lines_figures_into_forward_and_backward(tmp_path):
    folder = fx.write(tmp_path / "p", fx.sample(USER), "7.4.0")
    hlo = {"dot.9": ("model.py", 10)}
    profile = npf.read(folder)
    profile.instructions.append(npf.Instruction(300, 340, "pe", "MATMUL", "dot.9", [], (100, 0, 0, 0, 0, 0)))
    report = nl.line_times(profile, hlo_lines=hlo, phases={"dot.9": "backward"})
    row = {(t.file, t.line): t for t in report.lines}[("model.py", 10)]
    assert (row.time_ns, row.backward_ns, row.backward_work["raw_flops"], row.work["raw_flops"]) == (
        0,
        40,
        100,
        0,
    )
    assert row.engines == {"pe": 40}  # engines keep every phase


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
                ],
                "version": "8.1",  # any version is read
            }
        )
    )
    profile = npf.read(path)
    assert [i.hlo_name for i in profile.instructions] == ["dot.1", "add.2"] and profile.schema == "8.1"
    report = nl.line_times(profile, hlo_lines={"dot.1": ("m.py", 3), "add.2": ("m.py", 3)})
    assert [(t.line, t.time_ns, t.engines) for t in report.lines] == [(3, 150, {"act": 100, "pe": 100})]
    assert report.busy_ns == 150 and report.work_fields == ()


def test_missing_tables_and_bad_files_fail_with_one_line(tmp_path):
    folder = fx.write(tmp_path / "p", fx.sample(USER), "7.4.0")
    (folder / "StackFrame.parquet").unlink()
    with pytest.raises(npf.NeuronProfileError, match="no StackFrame table"):
        npf.read(folder)
    (folder / "Instruction.parquet").unlink()
    with pytest.raises(npf.NeuronProfileError, match="no Instruction table"):
        npf.read(folder)
    bad = tmp_path / "x.json"
    bad.write_text('{"events": []}')
    with pytest.raises(npf.NeuronProfileError, match='no "instruction" list'):
        npf.read(bad)


def test_a_session_processed_whole_is_every_device_profile_under_the_folder(tmp_path):
    out = tmp_path / "session"
    fx.write(out / "nc0", fx.sample(USER), "12.0.1")
    fx.write(out / "nc1", fx.sample(USER), "12.0.1")
    profiles = npf.read_all(out)
    assert len(profiles) == 2 and all(len(p.instructions) == 5 for p in profiles)
    (tmp_path / "empty").mkdir()
    with pytest.raises(npf.NeuronProfileError, match="not a neuron-explorer export"):
        npf.read_all(tmp_path / "empty")


def test_frame_walk_is_one_based_and_stops_at_zero():
    frames = {1: npf.Frame(LIB, "f", 1, 2), 2: npf.Frame(LIB, "g", 2, 0)}
    assert nl.user_frame(frames, 1, lambda f: not nl.is_library(f)) is None
    frames[2] = npf.Frame(USER, "g", 7, 1)  # a cycle must not hang
    assert nl.user_frame(frames, 1, lambda f: not nl.is_library(f)) == (USER, 7)
    assert nl.user_frame(frames, 0, lambda f: True) is None


def test_session_steps_are_confirmed_by_the_executions_repeating():
    step = ["neff_1.neff", "neff_2.neff", "neff_1.neff"]
    assert nl.repeats(step * 5, 5) and not nl.repeats(step * 5, 3)
    assert not nl.repeats(step * 4 + step[:2], 5) and not nl.repeats([], 1)

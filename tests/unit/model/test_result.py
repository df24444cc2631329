"""The result model: load/save/validate, and clear one-line errors for bad files."""

from __future__ import annotations

import json

import pytest

from trainium_lens.model import result as R


def minimal(**over) -> dict:
    doc = {
        "schema_version": 1,
        "run_id": "20261129-101500-abcd-0",
        "created_at": "2026-11-29T10:15:00Z",
        "backend": "cpu",
        "clock": "cpu",
        "host": "local",
        "function": {"file": "examples/rmsnorm.py", "name": "f", "line": 10},
        "totals": {"self_time_us": 12.5, "self_cpu_us": 12.5, "wall_us_median": 9.0, "steps": 5},
        "lines": [
            {
                "file": "examples/rmsnorm.py",
                "line": 11,
                "self_time_us": 12.5,
                "total_time_us": 12.5,
                "self_cpu_us": 12.5,
                "calls": 2,
                "ops": [{"name": "aten::mul", "calls": 2, "self_time_us": 12.5}],
            }
        ],
    }
    doc.update(over)
    return doc


def test_round_trip_keeps_every_field(tmp_path):
    res = R.Result.from_dict(minimal())
    res.output.max_abs = 3.5
    path = R.save(res, tmp_path / "r.json")
    again = R.load(path)
    assert again == res
    assert again.lines[0].ops[0].name == "aten::mul"
    assert again.function.protocol.active == 5  # defaults fill what the file omits
    assert not list(tmp_path.glob(".*.tmp"))  # the atomic write left nothing behind


def test_malformed_json_is_one_line(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema_version": 1,\n "run_id": ', encoding="utf-8")
    with pytest.raises(R.ResultError) as err:
        R.load(bad)
    msg = str(err.value)
    assert "\n" not in msg and "not valid JSON" in msg and "line 2" in msg


@pytest.mark.parametrize("drop, where", [("totals", "result: missing"), ("run_id", "result: missing")])
def test_missing_field_is_named(tmp_path, drop, where):
    doc = minimal()
    del doc[drop]
    path = tmp_path / "r.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(R.ResultError) as err:
        R.load(path)
    assert where in str(err.value) and drop in str(err.value)


def test_nested_missing_field_names_its_path():
    doc = minimal()
    del doc["lines"][0]["self_cpu_us"]
    with pytest.raises(R.ResultError, match=r"result\.lines\[0\]: missing .*self_cpu_us"):
        R.Result.from_dict(doc)


def test_wrong_type_names_the_field():
    doc = minimal()
    doc["totals"]["steps"] = "five"
    with pytest.raises(R.ResultError, match=r"result\.totals\.steps: expected an integer"):
        R.Result.from_dict(doc)


def test_newer_schema_says_upgrade():
    newer = R.SCHEMA_VERSION + 1
    with pytest.raises(R.ResultError, match=f"schema version {newer}.*upgrade trainium-lens"):
        R.Result.from_dict(minimal(schema_version=newer))


def test_a_schema_2_device_view_loads_as_model_mode_one_step():
    """Schema 3 added ``mode``/``steps`` to ``neuron_views``: a schema-2 view was a
    model-mode capture of one step."""
    view = {"neff": "/r/neff_1.neff", "ntff": "/r/1_instid_0_vnc_0.ntff", "parquet": "/r/v", "error": None}
    doc = minimal(schema_version=2)
    doc["artifacts"] = {"neuron_views": [view]}
    [loaded] = R.Result.from_dict(doc).artifacts.neuron_views
    assert (loaded.mode, loaded.steps, loaded.parquet) == ("model", 1, "/r/v")


def test_schema_2_loads_without_the_schema_3_fields():
    r = R.Result.from_dict(minimal(schema_version=2))
    assert r.schema_version == 2
    assert r.calibration is None and r.stability is None and r.reconciliation is None
    assert r.totals.step_us == [] and r.totals.calls_per_step == 1


def test_not_a_result():
    with pytest.raises(R.ResultError, match="no schema_version"):
        R.Result.from_dict({"hello": 1})
    with pytest.raises(R.ResultError, match="expected a JSON object"):
        R.Result.from_dict([1, 2])
    with pytest.raises(R.ResultError, match="unknown backend"):
        R.Result.from_dict(minimal(backend="tpu"))


def test_batch_parses_each_result():
    batch = R.Batch.from_dict(
        {"schema_version": 1, "batch_id": "b", "results": [minimal(), minimal(run_id="x-1")]}
    )
    assert [r.run_id for r in batch.results] == ["20261129-101500-abcd-0", "x-1"]
    with pytest.raises(R.ResultError, match="results"):
        R.Batch.from_dict({"batch_id": "b"})

"""The shared calibration (``$TRAINIUM_LENS_CALIBRATION``): a run reads the stored one
its key matches, measures its own where none matches or the stored one was measured
on a busy host, and without the variable always measures. The measurement itself is
replaced by a counter here (what is stored and read is under test; the real
calibration runs in every cpu-clock harness test)."""

from __future__ import annotations

import json

import pytest
import torch

from trainium_lens.harness.eager import calibration_store as store

ACTIVITIES = [torch.profiler.ProfilerActivity.CPU]
KWARGS = {"experimental_config": object()}


@pytest.fixture
def measured(monkeypatch):
    """Each measurement returns the next reading (µs per level); the calls are counted."""
    calls: list[float] = []

    def calibrate(_torch, _activities, _kwargs):
        calls.append(0.05 + 0.01 * len(calls))
        return {"per_depth_us": calls[-1], "per_top_us": 0.1, "gap_factor": 1.1, "cost_s": 0.8}

    monkeypatch.setattr(store, "calibrate", calibrate)
    monkeypatch.setattr(store, "start_profiler", lambda *a: 0.002)
    return calls


def plant(path, others_cores, per_depth=0.123, key=None):
    k = key or store.key(torch, "cpu", ACTIVITIES, KWARGS)
    path.write_text(
        json.dumps(
            {
                "entries": {
                    k: {
                        "calibration": {
                            "per_depth_us": per_depth,
                            "per_top_us": 0.2,
                            "gap_factor": 1.2,
                            "cost_s": 0.9,
                        },
                        "others_cores": others_cores,
                        "measured": "then",
                    }
                }
            }
        )
    )


def test_without_the_variable_every_run_measures_its_own(monkeypatch, measured):
    monkeypatch.delenv(store.ENV, raising=False)
    first = store.shared_or_measured(torch, "cpu", ACTIVITIES, KWARGS)
    second = store.shared_or_measured(torch, "cpu", ACTIVITIES, KWARGS)
    assert len(measured) == 2 and first["source"] == second["source"] == "measured"
    assert first["per_depth_us"] != second["per_depth_us"]


def test_a_quiet_stored_calibration_is_read_not_measured(tmp_path, monkeypatch, measured):
    path = tmp_path / "calibration.json"
    plant(path, others_cores=0.02)
    monkeypatch.setenv(store.ENV, str(path))
    cal = store.shared_or_measured(torch, "cpu", ACTIVITIES, KWARGS)
    assert measured == []
    assert (cal["per_depth_us"], cal["per_top_us"], cal["gap_factor"]) == (0.123, 0.2, 1.2)
    assert cal["cost_s"] == 0.0 and cal["profiler_start_s"] == 0.002  # the profiler still started once
    assert cal["source"] == f"shared: {path}, measured then"


@pytest.mark.parametrize("why", ["busy when stored", "another torch", "no file", "not json"])
def test_a_run_measures_its_own_where_nothing_usable_is_stored(tmp_path, monkeypatch, measured, why):
    path = tmp_path / "sub" / "calibration.json"
    path.parent.mkdir()
    if why == "busy when stored":
        plant(path, others_cores=0.9)
    elif why == "another torch":
        plant(path, others_cores=0.0, key="elsewhere|torch 2.9.0|python 3.11|cpu|x|y")
    elif why == "not json":
        path.write_text("{half a file")
    monkeypatch.setenv(store.ENV, str(path))
    cal = store.shared_or_measured(torch, "cpu", ACTIVITIES, KWARGS)
    assert len(measured) == 1 and cal["per_depth_us"] == measured[0]
    assert cal["source"].startswith("measured (")
    entries = json.loads(path.read_text())["entries"]
    mine = entries[store.key(torch, "cpu", ACTIVITIES, KWARGS)]
    assert mine["calibration"]["per_depth_us"] == measured[0]
    if why == "another torch":  # another venv's entry stays beside this one
        assert "elsewhere|torch 2.9.0|python 3.11|cpu|x|y" in entries


def test_what_a_quiet_run_stored_the_next_run_reads(tmp_path, monkeypatch, measured):
    path = tmp_path / "calibration.json"
    monkeypatch.setenv(store.ENV, str(path))

    class Quiet:
        def start(self):
            return self

        def stop(self):
            return {"others_cores": 0.1}

    monkeypatch.setattr(store, "HostWindow", Quiet)
    first = store.shared_or_measured(torch, "cpu", ACTIVITIES, KWARGS)
    second = store.shared_or_measured(torch, "cpu", ACTIVITIES, KWARGS)
    assert len(measured) == 1
    assert first["source"] == "measured (shared with later runs)"
    assert second["source"].startswith(f"shared: {path}") and second["per_depth_us"] == first["per_depth_us"]


def test_an_unwritable_file_leaves_the_run_its_own(tmp_path, monkeypatch, measured):
    monkeypatch.setenv(store.ENV, str(tmp_path / "a-file" / "calibration.json"))
    (tmp_path / "a-file").write_text("not a folder")
    cal = store.shared_or_measured(torch, "cpu", ACTIVITIES, KWARGS)
    assert len(measured) == 1 and cal["per_depth_us"] == measured[0]

"""The CPU roof's cache: measured once per host, kept; measured again when a line
beat it (a busy host made it low), each figure the best of both. ``measure`` is
replaced by a counter here (the caching is under test; the real measurement runs
in tests/integration/harness/test_work.py)."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest
import torch

from trainium_lens.harness.work import attach, calibrate


def fake(values):
    calls: list[int] = []

    def measure(_torch):
        fp32, bw = values[len(calls)]
        calls.append(1)
        return {
            "device": "cpu",
            "flops": [{"dtype": "float32", "flops_per_s": fp32}],
            "bytes_per_s": bw,
            "source": "measured on this host",
            "measured": True,
            "measured_at": datetime.now(timezone.utc).isoformat(),  # noqa: UP017
        }

    return measure, calls


@pytest.fixture(autouse=True)
def _own_roof_file(monkeypatch):
    """These roofs are made up: never in the tests' shared roof (tests/conftest.py)."""
    monkeypatch.delenv("TRAINIUM_LENS_ROOF", raising=False)


def test_the_roof_file_can_be_named_apart_from_the_run_folders(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAINIUM_LENS_CACHE", str(tmp_path / "runs"))
    assert calibrate.cache_file() == str(tmp_path / "runs" / "cpu-roof.json")
    monkeypatch.setenv("TRAINIUM_LENS_ROOF", str(tmp_path / "machine" / "roof.json"))
    measure, calls = fake([(1e11, 1e10)])
    monkeypatch.setattr(calibrate, "measure", measure)
    calibrate.cpu_roof(torch)
    assert (tmp_path / "machine" / "roof.json").exists() and not (tmp_path / "runs").exists()
    assert "cached" in calibrate.cpu_roof(torch)["source"] and len(calls) == 1


def test_measured_once_then_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAINIUM_LENS_CACHE", str(tmp_path))
    measure, calls = fake([(1e11, 1e10)])
    monkeypatch.setattr(calibrate, "measure", measure)
    first = calibrate.cpu_roof(torch)
    again = calibrate.cpu_roof(torch, {"flops": {"float32": 5e10}, "bytes_per_s": 0.0})
    assert len(calls) == 1 and "cached" in again["source"] and again["flops"] == first["flops"]
    assert list(json.loads((tmp_path / "cpu-roof.json").read_text())) == [
        f"{calibrate.cpu_model()}|threads={torch.get_num_threads()}|torch={torch.__version__}"
    ]


def test_a_line_faster_than_the_roof_measures_again_and_keeps_the_best(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAINIUM_LENS_CACHE", str(tmp_path))
    measure, calls = fake([(2e10, 1e10), (9e10, 5e9)])  # the first on a busy host
    monkeypatch.setattr(calibrate, "measure", measure)
    calibrate.cpu_roof(torch)
    roof = calibrate.cpu_roof(torch, {"flops": {"float32": 5e10}, "bytes_per_s": 0.0})
    assert len(calls) == 2
    assert roof["flops"] == [{"dtype": "float32", "flops_per_s": 9e10}]
    assert roof["bytes_per_s"] == 1e10  # the first measurement's copy was the better
    assert "best of every measurement" in roof["source"]


def test_a_roof_measured_on_a_busy_host_is_measured_again_once_its_retry_time_passed(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAINIUM_LENS_CACHE", str(tmp_path))
    measure, calls = fake([(2e10, 1e10), (9e10, 1e10)])
    busy = iter([True, False])

    def measure_busy(torch):
        roof = measure(torch)
        roof["busy"] = next(busy)
        return roof

    monkeypatch.setattr(calibrate, "measure", measure_busy)
    calibrate.cpu_roof(torch)  # taken while others used the CPU: trusted only for a while
    reused = calibrate.cpu_roof(torch)  # within BUSY_RETRY_S: not measured again
    assert len(calls) == 1 and reused["busy"] and "cached" in reused["source"]
    # a line faster than it has it measured again at once, however recent
    monkeypatch.setattr(calibrate, "BUSY_RETRY_S", 0.0)
    second = calibrate.cpu_roof(torch)
    third = calibrate.cpu_roof(torch)
    assert len(calls) == 2 and second["flops"] == [{"dtype": "float32", "flops_per_s": 9e10}]
    assert not second["busy"] and "cached" in third["source"]  # a quiet measurement is kept


def test_a_busy_roof_still_measures_again_when_a_line_beats_it(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAINIUM_LENS_CACHE", str(tmp_path))
    measure, calls = fake([(2e10, 1e10), (9e10, 1e10)])

    def measure_busy(torch):
        return dict(measure(torch), busy=True)

    monkeypatch.setattr(calibrate, "measure", measure_busy)
    calibrate.cpu_roof(torch)
    roof = calibrate.cpu_roof(torch, {"flops": {"float32": 5e10}, "bytes_per_s": 0.0})
    assert len(calls) == 2 and roof["flops"] == [{"dtype": "float32", "flops_per_s": 9e10}]


def test_an_undated_busy_roof_counts_as_old():
    assert calibrate._age_s({"measured_at": "2026-12-03T10:00:00"}) == float("inf")  # no zone
    assert calibrate._age_s({}) == float("inf")
    now = datetime.now(timezone.utc).isoformat()  # noqa: UP017
    assert 0 <= calibrate._age_s({"measured_at": now}) < 60


def test_measure_says_when_other_processes_took_the_cpu(monkeypatch):
    """The real measurement, with the host window stubbed to report a busy host."""
    from trainium_lens.harness.runtime import host

    monkeypatch.setattr(calibrate, "BUDGET_S", 0.03)
    monkeypatch.setattr(host.HostWindow, "stop", lambda self: {"others_cores": 1.2})
    roof = calibrate.measure(torch)
    assert roof["busy"] and "other processes used 1.2 cores meanwhile: may be low" in roof["source"]


def test_achieved_rates_from_the_lines():
    lines: list[dict] = [
        {"flops": 5e6, "dtype": "float32", "bytes": 1e3, "self_time_us": 200.0, "self_time_us_median": 100.0},
        {"flops": 0.0, "dtype": None, "bytes": 4e6, "self_time_us": 100.0},
    ]
    fast = attach.achieved(lines)  # forward rates by the median time
    assert fast["flops"]["float32"] == pytest.approx(5e10) and fast["bytes_per_s"] == pytest.approx(4e10)


def test_a_real_measurement_is_positive_and_says_how():
    torch.set_num_threads(1)
    roof = calibrate.measure(torch)
    assert {p["dtype"] for p in roof["flops"]} >= {"float32"}
    assert all(p["flops_per_s"] > 1e8 for p in roof["flops"]) and roof["bytes_per_s"] > 1e8
    assert roof["measured"] and "measured on this host" in roof["source"] and roof["cores"] == 1

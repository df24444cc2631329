"""RunStore: atomic saves, bounded history, prefix lookup, bad files skipped."""

from __future__ import annotations

import json
import logging

import pytest

from tests.unit.model.test_result import minimal
from trainium_lens.errors import LensError, UsageError
from trainium_lens.model.result import Result
from trainium_lens.model.store import RunStore


def make(run_id: str, name: str = "f", created: str = "2026-11-29T10:00:00Z") -> Result:
    doc = minimal(run_id=run_id, created_at=created)
    doc["function"]["name"] = name
    return Result.from_dict(doc)


def test_save_and_get(tmp_path):
    store = RunStore(tmp_path)
    path = store.save(make("20261129-100000-aaaa-0"))
    assert path == tmp_path / ".trainium-lens" / "runs" / "20261129-100000-aaaa-0.json"
    assert (tmp_path / ".trainium-lens" / ".gitignore").read_text() == "*\n"
    assert store.get("20261129-100000-aaaa-0").run_id == "20261129-100000-aaaa-0"
    assert store.get("20261129-100000-a").run_id == "20261129-100000-aaaa-0"  # prefix


def test_prefix_must_be_unique(tmp_path):
    store = RunStore(tmp_path)
    store.save(make("20261129-100000-aaaa-0"))
    store.save(make("20261129-100000-aaaa-1", name="g"))
    with pytest.raises(UsageError, match="ambiguous"):
        store.get("20261129-100000-aaaa")
    with pytest.raises(UsageError, match="no stored run"):
        store.get("1999")
    with pytest.raises(UsageError, match="not a run id"):
        store.path_for("../escape")


def test_history_is_bounded_per_function(tmp_path):
    store = RunStore(tmp_path, history=3)
    for i in range(5):
        store.save(make(f"r{i}", created=f"2026-11-29T10:00:0{i}Z"))
    store.save(make("other", name="g"))
    assert [r.run_id for r in store.history("examples/rmsnorm.py", "f")] == ["r2", "r3", "r4"]
    assert store.latest("examples/rmsnorm.py", "f").run_id == "r4"
    assert store.latest("examples/rmsnorm.py", "g").run_id == "other"  # untouched by pruning
    assert store.latest("examples/rmsnorm.py", "nope") is None


def test_bad_files_are_skipped_with_a_warning(tmp_path, caplog):
    store = RunStore(tmp_path)
    store.save(make("good", created="2026-11-29T10:00:00Z"))
    (store.runs / "corrupt.json").write_text("{not json", encoding="utf-8")
    newer = minimal(run_id="newer", schema_version=99)
    (store.runs / "newer.json").write_text(json.dumps(newer), encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="trainium_lens.model.store"):
        runs = store.load_all()
    assert [r.run_id for r in runs] == ["good"]
    assert sorted(p.name for p, _ in store.skipped) == ["corrupt.json", "newer.json"]
    assert "corrupt.json" in caplog.text
    # Asking for a bad one by name is a clear error, not a crash.
    with pytest.raises(LensError, match="schema version 99"):
        store.get("newer")
    # Saving still works and prunes without tripping over the bad files.
    store.save(make("good2", created="2026-11-29T10:00:01Z"))
    assert store.latest("examples/rmsnorm.py", "f").run_id == "good2"


def test_rewritten_file_is_reread(tmp_path):
    store = RunStore(tmp_path)
    res = make("r")
    store.save(res)
    assert store.get("r").totals.self_time_us == 12.5
    res.totals.self_time_us = 99.0
    res.lines.append(res.lines[0])  # size changes too, so the cache cannot hide it
    store.save(res)
    assert store.get("r").totals.self_time_us == 99.0


def test_empty_store(tmp_path):
    store = RunStore(tmp_path / "nothing-here")
    assert store.load_all() == []
    assert store.latest("a.py", "f") is None

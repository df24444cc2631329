"""``latest`` / ``latest~N``: a function's stored runs by age."""

from __future__ import annotations

import pytest

from tests.unit.model.test_result import minimal
from trainium_lens.cli import refs
from trainium_lens.errors import UsageError
from trainium_lens.model.result import Result
from trainium_lens.model.store import RunStore


def stored(store: RunStore, run_id: str, when: str, file: str = "a.py", name: str = "f") -> None:
    doc = minimal(run_id=run_id, created_at=when, function={"file": file, "name": name, "line": 3})
    store.save(Result.from_dict(doc))


def test_latest_and_back(tmp_path):
    store = RunStore(tmp_path)
    stored(store, "r1", "2026-11-30T10:00:00Z")
    stored(store, "r2", "2026-11-30T11:00:00Z")
    stored(store, "g1", "2026-11-30T10:30:00Z", name="g")
    stored(store, "b1", "2026-11-30T09:00:00Z", file="b.py", name="g")
    assert refs.back("latest") == 0 and refs.back("latest~3") == 3 and refs.back("r1") is None
    assert refs.pick(store, "latest").run_id == "r2"  # the newest run's function
    assert refs.pick(store, "latest~1").run_id == "r1"
    assert refs.pick(store, "latest", "a.py", "g").run_id == "g1"
    assert refs.pick(store, "latest", "b.py").run_id == "b1"
    with pytest.raises(UsageError, match="has 2 stored runs \\(latest~1 is the oldest\\)"):
        refs.pick(store, "latest~2")
    with pytest.raises(UsageError, match="g was profiled in several files"):
        refs.pick(store, "latest", None, "g")
    with pytest.raises(UsageError, match="no stored runs of c.py"):
        refs.pick(store, "latest", "c.py")


def test_workspace_file(tmp_path, monkeypatch):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text("")
    monkeypatch.chdir(tmp_path / "pkg")
    assert refs.workspace_file("m.py", tmp_path) == "pkg/m.py"
    assert refs.workspace_file("other/x.py", tmp_path) == "other/x.py"  # not here: as results name it

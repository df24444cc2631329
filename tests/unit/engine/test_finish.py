"""The after-batch stage ``profile`` and ``run`` share (``engine/finish.py``): each
step a path skips is an argument, and the run folders go on the target that holds
them — a run not stored or failed, and the batches the store pruned."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from trainium_lens.engine import finish as stage
from trainium_lens.errors import LensError, NotStored, TargetError
from trainium_lens.model.job import Job
from trainium_lens.model.result import GitState
from trainium_lens.model.store import RunStore
from trainium_lens.targets.base import EventSink, Target

BATCH = "20261130-031134-88b3"


class Folders(Target):
    """A target that only records which run folders it was asked to remove."""

    def __init__(self, host: str = "local") -> None:
        self.host = host
        self.removed: list[list[str]] = []

    def run(
        self,
        job: Job,
        on_event: EventSink,
        cancel: threading.Event | None = None,
        timeout: float | None = None,
    ) -> dict:
        raise AssertionError("not run here")

    def fetch(self, remote_path: str, dest: Path, *, workspace: Path) -> Path:
        raise AssertionError("nothing to fetch")

    def remove_runs(self, workspace: Path, batch_ids: list[str]) -> None:
        self.removed.append(list(batch_ids))


def document(batch: str = BATCH, function: str = "step", **result: object) -> dict:
    doc = {
        "schema_version": 1,
        "run_id": f"{batch}-0",
        "batch_id": batch,
        "created_at": "2026-11-30T03:11:44+00:00",
        "backend": "cpu",
        "clock": "cpu",
        "host": "local",
        "function": {"file": "t.py", "name": function, "line": 3},
        "totals": {"self_time_us": 10.0, "self_cpu_us": 10.0, "wall_us_median": 12.0, "steps": 1},
        "lines": [
            {
                "file": "t.py",
                "line": 4,
                "self_time_us": 10.0,
                "total_time_us": 10.0,
                "self_cpu_us": 10.0,
                "calls": 1.0,
            }
        ],
        "artifacts": {"location": "local", "run_dir": f"/cache/w/runs/{batch}"},
        **result,
    }
    return {"schema_version": 1, "batch_id": batch, "results": [doc]}


def finish(doc: dict, target: Target, store: RunStore | None, **skips: object) -> list:
    args: dict = {"device_lines": False, "source": None, "unstored": "keep", **skips}
    return stage.finish(
        doc,
        target=target,
        workspace=Path("/w"),
        batch_id=doc["batch_id"],
        git=GitState("abc"),
        store=store,
        **args,
    )


@pytest.fixture(autouse=True)
def _no_keep(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(stage.KEEP_RUNS_ENV, raising=False)


def test_results_stamped_reconciled_and_analysed() -> None:
    (result,) = finish(document(), Folders(), None)
    assert result.batch_id == BATCH and result.git == GitState("abc")
    assert result.reconciliation is not None and isinstance(result.findings, list)


def test_a_run_not_stored_keeps_or_removes_its_folder_as_told(monkeypatch: pytest.MonkeyPatch) -> None:
    target = Folders()
    finish(document(), target, None, unstored="keep")
    assert target.removed == []
    finish(document(), target, None, unstored="remove")
    assert target.removed == [[BATCH]]
    monkeypatch.setenv(stage.KEEP_RUNS_ENV, "1")
    finish(document(), target, None, unstored="remove")
    assert target.removed == [[BATCH]]


def test_device_lines_is_a_step_taken_only_when_asked() -> None:
    views = {"neuron_views": [{"neff": "/r/a.neff", "error": "no NTFF was captured"}]}
    doc = document(backend="xla", clock="xla", artifacts={"location": "local", "run_dir": "/r", **views})
    (skipped,) = finish(doc, Folders(), None, device_lines=False)
    assert skipped.signals.neuron_profile_error is None
    (taken,) = finish(doc, Folders(), None, device_lines=True)
    assert "no NTFF was captured" in (taken.signals.neuron_profile_error or "")


def test_fix_edits_only_with_the_source(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []

    def with_edits(result, found, read):
        asked.append(read("t.py"))
        return found

    monkeypatch.setattr(stage, "with_edits", with_edits)
    finish(document(), Folders(), None, source=None)
    assert asked == []
    finish(document(), Folders(), None, source=lambda rel: f"source of {rel}")
    assert asked == ["source of t.py"]


def test_stored_and_the_pruned_batches_folders_removed_on_their_own_target(tmp_path: Path) -> None:
    store = RunStore(tmp_path, history=1)
    here, host = Folders(), Folders("trn")
    finish(document("20261130-031134-0001"), here, store)
    finish(document("20261130-031134-0002", "other"), here, store)
    assert here.removed == []  # nothing pruned yet: one result per function
    finish(document("20261130-031134-0003"), here, store, unstored="remove")
    assert here.removed == [["20261130-031134-0001"]]  # step's older run was pruned; stored: kept
    trn = {"location": "trn", "run_dir": "/home/u/runs/x"}
    finish(document("20261130-031134-0004", artifacts=trn), host, store)
    finish(document("20261130-031134-0005", artifacts=trn), host, store)
    # 0003 (local) was pruned by 0004: not the host's folder to remove; 0004 (trn) was, by 0005
    assert host.removed == [["20261130-031134-0004"]]
    assert sorted(r.batch_id or "" for r in store.load_all()) == [
        "20261130-031134-0002",
        "20261130-031134-0005",
    ]


def test_a_store_that_cannot_be_written_keeps_the_results_and_the_folder(tmp_path: Path) -> None:
    (tmp_path / ".trainium-lens").write_text("a file where the store's folder goes")
    target = Folders()
    with pytest.raises(NotStored) as info:
        with stage.run_folder_removed_on_failure(target, Path("/w"), BATCH):
            finish(document(), target, RunStore(tmp_path), unstored="remove")
    assert [r.batch_id for r in info.value.results] == [BATCH] and target.removed == []


@pytest.mark.parametrize("error", [TargetError("ssh: gone"), KeyboardInterrupt()])
def test_a_failed_run_leaves_no_folder(error: BaseException) -> None:
    target = Folders()
    with pytest.raises(type(error)):
        with stage.run_folder_removed_on_failure(target, Path("/w"), BATCH):
            raise error
    assert target.removed == [[BATCH]]


def test_an_unusable_document_is_the_targets_error_and_its_folder_goes() -> None:
    target = Folders()
    with pytest.raises(TargetError, match="unusable result"):
        with stage.run_folder_removed_on_failure(target, Path("/w"), BATCH):
            finish(document(batch="../x"), target, None)
    with pytest.raises(LensError, match="no results"):
        finish({"schema_version": 1, "batch_id": BATCH, "results": []}, target, None)
    assert target.removed == [[BATCH]]

"""Run folders go with their results: when the store prunes a function's oldest
run, the runner removes its batch's folder on the target (here: this machine's
``$TRAINIUM_LENS_CACHE/<workspace id>/runs/``), once no stored result names it."""

from __future__ import annotations

from tests.conftest import workspace
from trainium_lens.engine import runner
from trainium_lens.model.job import make_job, workspace_id
from trainium_lens.model.store import RunStore
from trainium_lens.targets.local import LocalTarget

SOURCE = """import torch


# trainium: profile wait=0 warmup=0 active=1 timing_calls=1
def a():
    return torch.ones(8) + 1


# trainium: profile wait=0 warmup=0 active=1 timing_calls=1
def b():
    return torch.ones(8) * 2
"""


def test_a_batch_folder_goes_when_no_stored_result_names_it(tmp_path, cache):
    ws = workspace(tmp_path, "two.py", SOURCE)
    runs = cache / workspace_id(ws) / "runs"
    (runs / "not-a-batch-of-ours").mkdir(parents=True)  # never touched: no result was pruned for it
    store = RunStore(ws, history=1)
    target = LocalTarget()
    first = runner.profile(make_job(ws / "two.py"), target, store=store)  # a and b: one batch
    batch = first[0].batch_id
    runner.profile(make_job(ws / "two.py", functions=["a"]), target, store=store)
    assert (runs / batch).is_dir()  # b's result still names the first batch
    last = runner.profile(make_job(ws / "two.py", functions=["b"]), target, store=store)
    latest_a = store.latest("two.py", "a")
    assert latest_a is not None
    kept = {"not-a-batch-of-ours", last[0].batch_id, latest_a.batch_id}
    assert {p.name for p in runs.iterdir()} == kept
    assert not (runs / batch).exists()

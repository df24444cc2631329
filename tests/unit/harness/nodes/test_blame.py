"""Which node or rank a failed multi-process run names first, made in each order on
purpose. The lab's test (tests/nodes/test_faults.py) kills a node's processes, and
whether its peers' "connection closed" reached the CLI before the node's silence
showed was a race: one fresh CI run named the surviving node ("node1: rank 0 exited
during the run without an error …; then rank 1: … Connection closed by peer").

``slurm._follow`` reads the run folder the nodes' tasks write (``node{k}.out`` events,
``node{k}.alive`` heartbeats); here the folder is written by the test and srun is a
plain ``sleep`` process, as the follower only asks whether srun still runs (squeue
knows no such job). ``launch._blame_the_dead`` reads real processes' liveness."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from trainium_lens.harness.events import HarnessError
from trainium_lens.harness.nodes import slurm
from trainium_lens.harness.torchrun import launch

PEER = "rank 1: slow raised RuntimeError: Connection closed by peer [10.0.0.2]:16554 (slow.py:15)"


class Events:
    def __init__(self) -> None:
        self.errors: list[str] = []

    def emit(self, event: str, /, **fields: object) -> None:
        if event == "error":
            self.errors.append(str(fields.get("message")))

    def stage(self, *args: object, **fields: object) -> None:
        pass


@pytest.fixture
def srun():
    proc = subprocess.Popen(["sleep", "60"])
    yield proc
    proc.kill()
    proc.wait()


@pytest.fixture
def quick(monkeypatch):
    monkeypatch.setattr(slurm, "NODE_SILENT_S", 0.5)
    monkeypatch.setattr(slurm, "PEER_HOLD_S", 3.0)
    monkeypatch.setattr(slurm, "_squeue", lambda name: None)


def _event(run_dir: Path, k: int, message: str) -> None:
    with (run_dir / f"node{k}.out").open("a") as fh:
        fh.write(json.dumps({"event": "error", "kind": "user_code", "message": message}) + "\n")


def _follow(run_dir: Path, srun: subprocess.Popen, events: Events) -> int:
    return slurm._follow(SimpleNamespace(nproc=2), events, srun, "tlens-test", str(run_dir), 2)


def test_a_node_gone_silent_is_named_before_its_peers_dropped_connection(tmp_path, srun, quick):
    (tmp_path / "node0.alive").write_text("7")  # node 0 reported: its silence after that is no news
    (tmp_path / "node1.alive").write_text("7")  # node 1 died: its heartbeat stands still
    _event(tmp_path, 0, PEER)  # node 0's ranks noticed first
    events = Events()
    with pytest.raises(HarnessError) as info:
        _follow(tmp_path, srun, events)
    assert str(info.value).startswith("node 1: no sign of life"), info.value
    assert events.errors == []


def test_a_peer_error_with_no_other_cause_is_said_after_the_hold(tmp_path, srun, quick):
    # node 1 has no heartbeat yet (not started: never judged silent), and no error
    _event(tmp_path, 0, PEER)
    events = Events()
    t0 = time.monotonic()
    assert _follow(tmp_path, srun, events) == 1
    assert events.errors == [f"node 0: {PEER}"]
    assert time.monotonic() - t0 >= slurm.PEER_HOLD_S


def test_a_ranks_own_error_elsewhere_is_named_before_the_peer_that_noticed(tmp_path, srun, quick):
    _event(tmp_path, 0, PEER)
    _event(tmp_path, 1, "rank 2: slow raised ValueError: bad shape (slow.py:9)")
    events = Events()
    assert _follow(tmp_path, srun, events) == 1
    assert events.errors == ["node 1: rank 2: slow raised ValueError: bad shape (slow.py:9)"]


def _ended() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_a_rank_dead_while_the_reporting_rank_lives_is_named():
    alive = subprocess.Popen(["sleep", "30"])
    try:
        event = launch._blame_the_dead({"rank": 0, "message": PEER}, {0: alive.pid, 1: _ended()})
    finally:
        alive.kill()
        alive.wait()
    assert event["message"].startswith("rank 1 exited during the run without an error"), event


def test_a_rank_found_dead_after_the_reporting_rank_ended_is_not_blamed():
    """torchrun's agent stops every rank once one exits: the reporting rank gone, a dead
    peer may be one the agent stopped after it, so the rank's own error stands."""
    event = launch._blame_the_dead({"rank": 1, "message": PEER}, {0: _ended(), 1: _ended()})
    assert event["message"] == PEER

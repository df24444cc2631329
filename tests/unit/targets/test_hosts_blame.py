"""Which host a failed ``--hosts`` job names, when its peers' "connection closed"
reaches the CLI before the dead node's own failure (targets/nodes/hosts.py). The lab's
test (tests/nodes/test_faults.py) kills node2's processes; one fresh CI run named
node1 ("rank 1: slow raised RuntimeError: … Connection closed by peer"), because
node2, told to stop at node1's error, ended with "cancelled" before its closed
connection showed. Here the nodes are stand-ins that fail in that order on purpose
(the SSH and the lab's timing are what the lab's test exercises)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from trainium_lens.errors import Cancelled, HarnessError, TargetError
from trainium_lens.model.job import Job
from trainium_lens.targets.nodes import hosts
from trainium_lens.targets.nodes.hosts import HostsTarget
from trainium_lens.targets.where import Where

PEER = "rank 1: slow raised RuntimeError: Connection closed by peer [10.0.0.2]:17558 (slow.py:15)"


class Node:
    """A stand-in for one host's SshTarget: fails after ``after`` s with ``error``,
    or says "cancelled" if told to stop first (as SshTarget.run does)."""

    def __init__(self, after: float, error: Exception) -> None:
        self.after, self.error = after, error

    def run(self, job: Job, on_event: object, cancel: threading.Event, timeout: float | None) -> dict:
        if cancel.wait(self.after):
            raise Cancelled("cancelled")
        raise self.error


def _job(nodes: list[Node], monkeypatch: pytest.MonkeyPatch) -> HostsTarget:
    target = HostsTarget(Where(hosts=("node1", "node2")))
    target.nodes = nodes  # type: ignore[assignment]
    monkeypatch.setattr(target, "probe", lambda: [])
    monkeypatch.setattr(target, "node_jobs", lambda job: [job, job])
    return target


def _run(target: HostsTarget) -> Exception:
    job = Job(workspace=Path("/ws"), file="slow.py", nproc=2)
    with pytest.raises(Exception) as info:
        target.run(job, lambda event: None)
    return info.value


def test_the_node_that_went_away_is_named_though_a_peer_noticed_first(monkeypatch):
    closed = TargetError("node2: the SSH connection was closed by the host")
    target = _job([Node(0.0, HarnessError("user_code", PEER)), Node(0.3, closed)], monkeypatch)
    error = _run(target)
    assert isinstance(error, TargetError) and str(error).startswith("node2:"), error


def test_a_peer_error_with_no_other_cause_is_said_after_the_grace(monkeypatch):
    monkeypatch.setattr(hosts, "BLAME_GRACE_S", 0.5)
    target = _job(
        [Node(0.0, HarnessError("user_code", PEER)), Node(30.0, RuntimeError("never"))], monkeypatch
    )
    t0 = time.monotonic()
    error = _run(target)
    assert isinstance(error, HarnessError) and str(error).startswith("node1: rank 1:"), error
    assert time.monotonic() - t0 < 10  # the other node was stopped once the grace ran out


def test_a_ranks_own_error_stops_the_others_at_once(monkeypatch):
    monkeypatch.setattr(hosts, "BLAME_GRACE_S", 30.0)
    own = HarnessError("user_code", "rank 0: step raised ValueError: bad shape (train.py:9)")
    target = _job([Node(0.0, own), Node(30.0, RuntimeError("never"))], monkeypatch)
    t0 = time.monotonic()
    error = _run(target)
    assert str(error).startswith("node1: rank 0: step raised ValueError"), error
    assert time.monotonic() - t0 < 10

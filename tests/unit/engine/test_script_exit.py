"""A ``run`` whose command exited non-zero after its result was written: the
launcher's failure told apart from the script's (``engine/script_exit.py``), and
a command stopped once its scripts have ended and only torchrun's exit barrier
waits (``targets/outcome.Waiting``)."""

from __future__ import annotations

import pytest

from trainium_lens.engine.script_exit import launcher_note
from trainium_lens.targets import outcome
from trainium_lens.targets.outcome import Outcome, Waiting

STORE = "The connection to the C10d store has failed. See inner exception for details."
# torchrun's own failure table, as a rank aborted at interpreter exit leaves it (lab run, torch 2.13)
ABORTED = """
======================================================
train.py FAILED
------------------------------------------------------
Failures:
[1]:
  time      : 2026-12-04_02:58:30
  host      : node1
  rank      : 1 (local_rank: 1)
  exitcode  : -15 (pid: 10054)  (SIGTERM)
  error_file: <N/A>
  traceback : Signal 15 (SIGTERM) received by PID 10054
------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-12-04_02:58:30
  host      : node1
  rank      : 0 (local_rank: 0)
  exitcode  : -6 (pid: 10052)  (SIGABRT)
  error_file: <N/A>
  traceback : Signal 6 (SIGABRT) received by PID 10052
======================================================"""


def _events(ended: list[int], errors: list[tuple[str, str, str]]) -> list[dict]:
    events: list[dict] = [{"event": "hello", "role": "agent", "pid": 10, "node": "node1"}]
    events += [{"event": "hello", "role": "worker", "rank": r, "pid": 100 + r} for r in range(4)]
    events += [{"event": "result", "rank": r, "path": f"/r{r}/batch.json"} for r in range(4)]
    events += [{"event": "exit", "rank": r, "pid": 100 + r, "steps": 12} for r in ended]
    events += [{"event": "launcher_error", "type": t, "node": n, "message": m} for n, t, m in errors]
    return events


def _outcome(
    code: int, ended: list[int], errors: list[tuple[str, str, str]], stopped: bool = False
) -> Outcome:
    return Outcome(returncode=code, events=_events(ended, errors), stopped_waiting=stopped)


def test_a_rank_aborted_at_exit_is_named_as_torchs_gloo_teardown():
    note = launcher_note(
        _outcome(
            1,
            [0, 1, 2, 3],
            [("node2", "RendezvousConnectionError", STORE), ("node1", "ChildFailedError", ABORTED)],
        )
    )
    assert note is not None
    assert note.startswith("every rank's script ran to its end (4 of 4) and the result is complete")
    assert "rank 0 on node1 was aborted (SIGABRT) as Python shut down" in note
    assert "pytorch/pytorch#179291" in note
    assert "the other agents lost its store (on node2: RendezvousConnectionError)" in note
    assert note.endswith("The exit status 1 is the command's")


def test_the_store_gone_after_every_rank_ended_is_named_as_torchruns():
    note = launcher_note(_outcome(1, [0, 1, 2, 3], [("node2", "RendezvousConnectionError", STORE)]))
    assert note is not None and "every rank's script ran to its end (4 of 4)" in note
    assert "c10d rendezvous store (on node2: RendezvousConnectionError)" in note
    assert "pytorch/pytorch#69197" in note and "SIGABRT" not in note


def test_a_rank_killed_before_its_end_is_not_put_down_to_torch():
    note = launcher_note(_outcome(1, [0, 1], [("node1", "ChildFailedError", ABORTED)]))
    assert note is not None
    assert "result is complete" not in note and "#179291" not in note
    assert "rank 0 on node1 ended with exit code -6" in note and "2 of 4 ranks ran their script" in note


def test_a_stopped_wait_is_said_with_the_status_it_was_given():
    note = launcher_note(_outcome(1, [0, 1, 2, 3], [("node2", "ChildFailedError", ABORTED)], stopped=True))
    assert note is not None and "waiting in torch's exit barrier" in note
    assert note.endswith("The exit status is 1, the failed agent's")


def test_nothing_is_said_without_an_agent_error_or_on_success():
    assert launcher_note(_outcome(1, [0, 1, 2, 3], [])) is None  # the script's own status
    assert launcher_note(_outcome(0, [0, 1, 2, 3], [("node2", "RendezvousConnectionError", STORE)])) is None


def test_the_command_is_over_only_when_every_script_ended_and_an_agent_failed(
    monkeypatch: pytest.MonkeyPatch,
):
    monkeypatch.setattr(outcome, "WAITING_S", 0.0)
    failed = [("node2", "ChildFailedError", ABORTED)]
    assert not Waiting().over(_events([0, 1, 2, 3], []))  # the agents may still end by themselves
    assert not Waiting().over(_events([0, 1, 2], failed))  # rank 3 still runs its script
    restarted = _events([0, 1, 2, 3], failed) + [{"event": "hello", "role": "worker", "rank": 3, "pid": 999}]
    assert not Waiting().over(restarted)  # a new worker for rank 3: not over
    waiting = Waiting()
    assert waiting.over(_events([0, 1, 2, 3], failed))


def test_the_wait_is_given_its_seconds_first(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(outcome, "WAITING_S", 3600.0)
    waiting = Waiting()
    events = _events([0, 1, 2, 3], [("node2", "ChildFailedError", ABORTED)])
    assert not waiting.over(events) and waiting.since is not None

"""A ``run`` whose command exited non-zero after its result was written: the
launcher's failure told apart from the script's (``engine/script_exit.py``), and
a command stopped once its scripts have ended and only torchrun's exit barrier
waits (``targets/outcome.Waiting``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainium_lens.engine.script import ScriptRequest, explain
from trainium_lens.engine.script_exit import launcher_note
from trainium_lens.model.script import parse_command
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


def test_a_job_slurm_ended_is_named_before_torchruns_agent():
    """srun's job cancelled after the window: torchrun's agents raise SignalException as
    SLURM stops them; the note names SLURM's end (a ``slurm_end`` event the runner asked
    of SLURM, harness/nodes/slurm_end.py), not the agents' exception."""
    signal = ("node1", "SignalException", "Process 11886 got signal: 15")
    cancelled = {
        "event": "slurm_end",
        "job": "12",
        "state": "CANCELLED",
        "cause": "the SLURM job 12 was cancelled",
    }
    run = _outcome(1, [], [signal])
    run.events.append(cancelled)
    assert launcher_note(run) == (
        "the window's result is complete; then the SLURM job 12 was cancelled, "
        "and srun ended with exit status 1 (the command's)"
    )
    run.returncode = 0  # srun's, once in the lab after a scancel: its tasks' statuses lost
    assert str(launcher_note(run)).endswith(
        "srun's exit status 0 (its tasks' statuses lost) is no success: the exit status is 1"
    )
    run.returncode = 1
    run.events[-1] = {**cancelled, "state": "COMPLETED", "cause": None}  # the script's own end
    assert "torchrun's agent raised (on node1: SignalException" in str(launcher_note(run))


def test_a_job_slurm_ended_before_the_window_is_named_not_a_missing_step(tmp_path: Path) -> None:
    """Cancelled while the ranks were armed: no rank wrote ``exit`` (they were stopped),
    which the old explanation read as "the script never made a step"."""
    (tmp_path / "train.py").write_text("")
    req = ScriptRequest(command=parse_command(["python", "train.py"], tmp_path), cwd=tmp_path)
    events = [
        {"event": "hello", "role": "worker", "rank": 0, "pid": 100, "slurm_job": "12"},
        {"event": "armed", "rank": 0, "window": [3, 5], "tried": ["optimizer step hooks"]},
    ]
    assert "never made a step" in str(explain(Outcome(returncode=1, events=events), req))
    events.append(
        {"event": "slurm_end", "job": "12", "state": "CANCELLED", "cause": "the SLURM job 12 was cancelled"}
    )
    failed = explain(Outcome(returncode=143, events=events), req)
    assert str(failed) == (
        "the SLURM job 12 was cancelled, before the window (steps 3:5) was complete "
        "(exit status 143 from srun; nothing stored)"
    )
    assert failed.returncode == 143

"""What a ``run`` whose command exited non-zero after its result was written
says about that status: the launcher's failure told apart from the script's.

Two ways a torchrun job fails after every rank's script has ended, both torch's
own and both seen in plain torchrun runs without this tool (docs/scripts.md,
"When the job fails after its scripts ended"):

* **A rank aborted at interpreter exit.** Gloo's worker threads outlive the
  script (DDP holds the process group past ``destroy_process_group()``) and may
  drop a work item that holds a Python object while Python is shutting down:
  ``terminate called without an active exception``, SIGABRT
  (pytorch/pytorch#179291). Checked here on torch 2.13: a two-rank DDP script on
  gloo, plain ``torchrun``, aborted in 5 of 30 runs. torchrun then reports the
  rank failed (``ChildFailedError``, its root cause ``exitcode: -6``).
* **The c10d store gone.** The rendezvous store lives in one node's agent; when
  that agent ends first, the others, still polling it, end with
  ``RendezvousConnectionError`` (pytorch/pytorch#69197).

The agent's own exception comes from the harness's hook in the agent
(``harness/script/arm.py``, ``launcher_error``); a rank's ``exit`` event is
written by its ``atexit``, so it exists only for a script that ended by itself.
The exit status stays the command's: this only says which part failed.
"""

from __future__ import annotations

import re

from trainium_lens.targets.outcome import Outcome, slurm_ended

#: The agent's errors that are its rendezvous store's, not the workers'.
STORE_ERRORS = frozenset({"RendezvousConnectionError", "RendezvousClosedError"})
ABORT_TRACKER = "pytorch/pytorch#179291"
STORE_TRACKER = "pytorch/pytorch#69197"
#: torchrun's failure table: the root cause's host, rank and exit code.
_ROOT = re.compile(
    r"Root Cause.*?host\s*:\s*(?P<host>\S+).*?rank\s*:\s*(?P<rank>\d+).*?exitcode\s*:\s*(?P<code>-?\d+)",
    re.DOTALL,
)


def launcher_note(outcome: Outcome) -> str | None:
    """One line on a non-zero status when torchrun's agent raised, else None."""
    by_slurm = slurm_ended(outcome.events)
    if by_slurm is not None:  # under srun, SLURM stopped the ranks after the window: its cause, not torch's
        status = (
            "srun's exit status 0 (its tasks' statuses lost) is no success: the exit status is 1"
            if outcome.returncode == 0
            else f"srun ended with exit status {outcome.returncode} (the command's)"
        )
        return f"the window's result is complete; then {by_slurm}, and {status}"
    errors = sorted((e for e in outcome.events if e.get("event") == "launcher_error"), key=_node)
    if outcome.returncode == 0 or not errors:
        return None
    ranks = {e.get("rank") for e in outcome.events if e.get("event") == "result"}
    ended = {e.get("rank") for e in outcome.events if e.get("event") == "exit"}
    done = len(ranks & ended)
    status = (
        "The exit status is 1, the failed agent's"
        if outcome.stopped_waiting
        else f"The exit status {outcome.returncode} is the command's"
    )
    stopped = (
        "; the command was stopped then, its other agents waiting in torch's exit barrier for the failed one"
        if outcome.stopped_waiting
        else ""
    )
    if done != len(ranks) or not ranks:
        return (
            f"torchrun's agent raised ({_which(errors)}: {_short(errors[0])}); "
            f"{done} of {len(ranks)} ranks ran their script to its end{stopped}. {status}"
        )
    lead = f"every rank's script ran to its end ({done} of {len(ranks)}) and the result is complete"
    # the rank's node: the agent's that reported it (torchrun's table says "localhost" on one node)
    roots = [
        (e.get("node") or m["host"], m) for e in errors if (m := _ROOT.search(str(e.get("message") or "")))
    ]
    aborted = [(node, m) for node, m in roots if m["code"] == "-6"]
    store = [e for e in errors if e.get("type") in STORE_ERRORS]
    if aborted:
        node, m = aborted[0]
        lost = f"; the other agents lost its store ({_which(store)})" if store else ""
        return (
            f"{lead}; then rank {m['rank']} on {node} was aborted (SIGABRT) as Python shut down, "
            f"after its script had ended: torch's gloo threads still held work at interpreter exit "
            f"({ABORT_TRACKER}; plain torchrun runs abort so too), and torchrun failed the job"
            f"{lost}{stopped}. {status}"
        )
    if len(store) == len(errors):
        return (
            f"{lead}; then torchrun's agent ended with an error of its c10d rendezvous store "
            f"({_which(errors)}): the store closed under it when the node hosting it left "
            f"({STORE_TRACKER}), not your script's failure{stopped}. {status}"
        )
    return f"{lead}; then torchrun's agent raised ({_which(errors)}){stopped}. {status}"


def _which(errors: list[dict]) -> str:
    return "; ".join(f"on {e.get('node') or 'a node'}: {e.get('type')}" for e in errors)


def _short(error: dict) -> str:
    """torchrun's failure table as its root cause, else the message's first line."""
    message = str(error.get("message") or "")
    m = _ROOT.search(message)
    if m:
        return f"rank {m['rank']} on {m['host']} ended with exit code {m['code']}"
    return next((ln.strip() for ln in message.splitlines() if ln.strip()), "")[:300]


def _node(event: dict) -> str:
    return str(event.get("node") or "")

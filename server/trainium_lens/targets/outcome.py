"""What a script run (``Target.run_script``) gives back, and when its command only
waits: shared by this machine's runner (``script.py``) and a host's (``ssh/script.py``),
read by the engine (``engine/script.py``, ``engine/script_exit.py``)."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

#: Seconds the command may run on once every armed process has ended its script and a
#: torchrun agent has failed: the other agents then wait in torch's exit barrier for the
#: failed one (300 s by default) with nothing left to run (engine/script_exit.py).
WAITING_S = float(os.environ.get("TRAINIUM_LENS_WAITING_S", "10"))


@dataclass
class Outcome:
    returncode: int
    events: list[dict] = field(default_factory=list)
    results: list[str] = field(default_factory=list)  # batch paths the armed processes wrote
    documents: dict[str, dict] = field(default_factory=dict)  # path -> batch, when read already (a host's)
    stopped_waiting: bool = False  # stopped after its scripts ended, a launcher failed (``Waiting``)


def slurm_ended(events: list[dict]) -> str | None:
    """Under srun, the line saying SLURM ended the job (a scancel, a node lost, the time
    limit: a ``slurm_end`` event, asked of SLURM when the command failed), else None."""
    for event in events:
        if event.get("event") == "slurm_end" and event.get("cause"):
            return str(event["cause"])
    return None


def _not_ended(events: list[dict]) -> tuple[bool, set]:
    """(whether any process armed, those that never wrote their ``exit``): a process
    writes it at its interpreter's exit, so one that was killed never does; keyed by
    rank and pid (a restarted worker is a new one)."""
    armed = {
        (e.get("rank"), e.get("pid"))
        for e in events
        if e.get("event") == "hello" and e.get("role") in ("main", "worker")
    }
    return bool(armed), armed - {(e.get("rank"), e.get("pid")) for e in events if e.get("event") == "exit"}


def killed_ranks(events: list[dict]) -> bool:
    """Whether an armed process ended without its ``exit``: it was killed."""
    return bool(_not_ended(events)[1])


class Waiting:
    """Whether the command only waits now: every armed process has ended its script
    (its ``exit``, keyed by rank and pid: a restarted worker is a new one) and a
    torchrun agent has raised, for ``WAITING_S``."""

    def __init__(self) -> None:
        self.since: float | None = None

    def over(self, events: list[dict]) -> bool:
        if not self._ended(events):
            self.since = None
            return False
        now = time.monotonic()
        self.since = self.since if self.since is not None else now
        return now - self.since >= WAITING_S

    @staticmethod
    def _ended(events: list[dict]) -> bool:
        if not any(e.get("event") == "launcher_error" for e in events):
            return False
        armed, left = _not_ended(events)
        return armed and not left

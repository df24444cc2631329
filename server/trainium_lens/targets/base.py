"""The one interface every target implements (local subprocess, OpenSSH).

A target runs the harness for a ``Job`` (``run``), or the user's own command with
the harness injected (``run_script``), and streams its progress events back.
It owns everything about *where*: syncing the workspace, placing the harness,
choosing the run directory, stopping the remote process group on cancel.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path

from trainium_lens.errors import TargetError
from trainium_lens.harness.spec import ScriptSpec
from trainium_lens.model.job import Job
from trainium_lens.model.script import ScriptCommand
from trainium_lens.targets.outcome import Outcome

# One progress event from the harness (a decoded JSON line), or one the target
# adds itself (stage "connect"/"sync").
EventSink = Callable[[dict], None]


class Target(ABC):
    #: "local" or the SSH host as the user named it; written into results.
    host: str = "local"

    @abstractmethod
    def run(
        self,
        job: Job,
        on_event: EventSink,
        cancel: threading.Event | None = None,
        timeout: float | None = None,
    ) -> dict:
        """Run the job; return the harness's batch document (a dict).

        Raises ``HarnessError`` (the harness reported an error event),
        ``TargetError`` (could not run it), ``Cancelled`` (``cancel`` was set:
        the harness's whole process group is stopped before this returns),
        ``TimedOut`` (likewise, after ``timeout`` seconds).
        """

    def run_script(
        self,
        command: ScriptCommand,
        spec: ScriptSpec,
        on_event: EventSink,
        *,
        workspace: Path,
        cwd: Path,
        env: dict[str, str] | None = None,
        cancel: threading.Event | None = None,
        timeout: float | None = None,
        capture: bool = False,
    ) -> Outcome:
        """Run the user's ``command`` (``trainium-lens run``) in ``cwd`` of ``workspace``
        with the harness injected; ``spec`` is the harness's script spec, passed
        through except for what only the target knows: its ``run_dir`` (the target
        picks it: ``<workspace id>/runs/<batch_id>`` in its cache or work dir), and on
        a host its ``workspace_root`` and ``host``. ``env``: set for the command;
        ``capture``: its output as ``output`` events rather than on our stdout/stderr.
        Raises as ``run`` does; the command's own exit status is the outcome's.
        The targets across nodes refuse it: there the user's own command spreads the
        ranks (``run -- srun …`` or ``torchrun --nnodes …``, docs/nodes.md)."""
        raise TargetError(
            f"{self.host}: `trainium-lens run` runs a command here or on one SSH host (--host); "
            "across nodes, run your own srun or torchrun command (docs/nodes.md)"
        )

    @abstractmethod
    def fetch(self, remote_path: str, dest: Path, *, workspace: Path) -> Path:
        """Copy an artifact (file or folder) from the target to ``dest``.

        ``remote_path`` comes from a stored result (untrusted): it is copied only
        when it lies in a run folder of ``workspace`` on the target (its
        ``runs/<batch>`` folders, links resolved there); anything else is a
        ``TargetError``. A failed or refused fetch leaves nothing at ``dest``."""

    def remove_runs(self, workspace: Path, batch_ids: list[str]) -> None:  # noqa: B027 (optional)
        """Remove the run folders ``<runs>/<batch_id>`` of ``workspace`` on this target
        (their results were pruned). Ids are checked: only folders directly in the
        workspace's runs folder go."""

    def close(self) -> None:  # noqa: B027 (optional hook: most targets hold nothing)
        """Release connections (e.g. an SSH ControlMaster)."""

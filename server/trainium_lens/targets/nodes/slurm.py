"""A job across nodes through SLURM (``--slurm LOGIN --nodes N --nproc P``).

The login host is an ordinary SSH target: the workspace is synced into its
work dir and the harness runs there as for any run, with the request in the
spec (``Job.slurm``). There the harness becomes the SLURM driver
(``harness/nodes/slurm.py``): ``srun`` one task per node, each a node launcher with
its node rank from ``$SLURM_NODEID`` and the allocation's first node as the
rendezvous address; a guard that scancels the job when the driver ends in any
way. So every way of stopping the run ends the job: a cancel or a timeout
kills the driver's group on the login host (``SshTarget``), a kill -9 of this
process closes its ssh, whose end of file does the same there.

SLURM jobs read the workspace and write their results in the login host's
work dir: it must be on a filesystem the nodes share (the home on
ParallelCluster; ``--work-dir`` to pick another).
"""

from __future__ import annotations

import dataclasses
import random
import threading
from pathlib import Path

from trainium_lens.errors import TimedOut, UsageError
from trainium_lens.model.job import Job
from trainium_lens.targets.base import EventSink, Target
from trainium_lens.targets.nodes.hosts import PORT_RANGE
from trainium_lens.targets.ssh.target import SshTarget
from trainium_lens.targets.where import NodeOptions, Where


def slurm_request(node: NodeOptions) -> dict:
    """The request from the node options (checked here: one line each)."""
    nodes = node.nodes if node.nodes is not None else 2
    if nodes < 1:
        raise UsageError(f"--nodes must be at least 1, got {nodes}")
    extra = list(node.slurm_args)
    bad = [a for a in extra if not a.startswith("-")]
    if bad:
        raise UsageError(f"--slurm-arg takes srun options (starting with -), got {bad[0]!r}")
    request: dict = {
        "nodes": nodes,
        "args": extra,
        "master_port": random.randint(*PORT_RANGE),
        "join_timeout_s": node.join_timeout_s,
        "pg_timeout_s": node.pg_timeout_s,
    }
    for key, value in (("partition", node.partition), ("time", node.time), ("account", node.account)):
        if value:
            request[key] = value
    if node.ifname:
        request["ifname"] = node.ifname
    return request


class SlurmTarget(Target):
    def __init__(self, where: Where) -> None:
        """Through the login host ``where.slurm``, with ``where.node``'s request."""
        login = where.slurm or ""
        self.login = SshTarget(
            login, ssh_config=where.ssh_config, remote_python=where.remote_python, work_dir=where.work_dir
        )
        self.request = slurm_request(where.node)
        self.host = login
        self.state = ""  # the allocation's last state, from squeue (pending and why)

    def run(
        self,
        job: Job,
        on_event: EventSink,
        cancel: threading.Event | None = None,
        timeout: float | None = None,
    ) -> dict:
        def sink(event: dict) -> None:
            if event.get("event") == "stage" and event.get("stage") in ("pending", "allocation", "submit"):
                self.state = str(event.get("message") or "")
            on_event(event)

        job = dataclasses.replace(job, slurm=dict(self.request), nproc=job.nproc or 1)
        try:
            return self.login.run(job, sink, cancel, timeout)
        except TimedOut as exc:
            if "pending" in self.state:  # the allocation never started
                raise TimedOut(
                    f"{exc}: the allocation never started ({self.state}); it was cancelled"
                ) from None
            raise

    def fetch(self, remote_path: str, dest: Path, *, workspace: Path) -> Path:
        # the run folder is shared with the nodes
        return self.login.fetch(remote_path, dest, workspace=workspace)

    def remove_runs(self, workspace: Path, batch_ids: list[str]) -> None:
        self.login.remove_runs(workspace, batch_ids)

    def close(self) -> None:
        self.login.close()

"""Where a run happens, as one value: this machine, one SSH host, several SSH hosts
as the nodes of one job (``--hosts``), or a SLURM allocation from a login host
(``--slurm``), with the options that go with each.

A ``Where`` is built in two places only, the CLI's arguments (``cli/where.py``)
and the language server's settings (``lsp/settings.py``); ``make.make_target``
turns it into the ``Target`` that runs there. Nothing else threads an SSH config
or a remote Python through its calls: it passes the ``Where`` (or the target).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from trainium_lens.errors import UsageError


@dataclass(frozen=True)
class NodeOptions:
    """What a job across nodes needs beyond its hosts (docs/nodes.md)."""

    #: The nodes' cluster interface (its address is each node's rendezvous address).
    ifname: str | None = None
    #: Seconds a node waits for the others to join; a rank in a collective for the others.
    join_timeout_s: int = 60
    pg_timeout_s: int = 120
    #: ``--hosts``: a node silent this long over SSH is named as gone.
    node_timeout_s: float = 10.0
    #: ``--slurm``: the allocation's size and the srun options.
    nodes: int | None = None  # None: 2
    partition: str | None = None
    time: str | None = None
    account: str | None = None
    slurm_args: tuple[str, ...] = ()


@dataclass(frozen=True)
class Where:
    #: One host: None (or "local") is this machine, else an SSH host as ``~/.ssh/config`` names it.
    host: str | None = None
    #: Several SSH hosts, one torchrun each (the first hosts the rendezvous).
    hosts: tuple[str, ...] = ()
    #: A SLURM login host (an SSH host) to submit from.
    slurm: str | None = None
    #: This machine's Python with torch (default: the running interpreter).
    python: str | None = None
    ssh_config: str | None = None
    remote_python: str | None = None
    #: The work dir on the SSH host(s); default ``~/.cache/trainium-lens/<workspace id>``.
    work_dir: str | None = None
    node: NodeOptions = field(default_factory=NodeOptions)

    def __post_init__(self) -> None:
        if self.host == "local" or self.host == "":
            object.__setattr__(self, "host", None)
        if sum(bool(x) for x in (self.host, self.hosts, self.slurm)) > 1:
            raise UsageError("use one of --host, --hosts and --slurm")
        if len(set(self.hosts)) != len(self.hosts):
            raise UsageError(f"--hosts names a host twice: {','.join(self.hosts)}")

    @property
    def kind(self) -> str:
        """``"local"``, ``"ssh"``, ``"hosts"`` or ``"slurm"``."""
        if self.hosts:
            return "hosts"
        if self.slurm:
            return "slurm"
        return "ssh" if self.host else "local"

    @property
    def name(self) -> str:
        """The host a result names: "local", the SSH host, rank 0's host, the login host."""
        return self.host or (self.hosts[0] if self.hosts else None) or self.slurm or "local"

    def at(self, host: str | None) -> Where:
        """The same connection options, for one host (None/"local": this machine):
        where a stored result's artifacts are, say."""
        return dataclasses.replace(self, host=host, hosts=(), slurm=None)

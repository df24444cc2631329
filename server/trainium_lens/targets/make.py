"""The one place a ``Where`` becomes the ``Target`` that runs there."""

from __future__ import annotations

from trainium_lens.targets.base import Target
from trainium_lens.targets.where import Where


def make_target(where: Where) -> Target:
    """This machine (a subprocess), an SSH host, several SSH hosts as one job's
    nodes, or a SLURM allocation from a login host, as ``where`` says."""
    if where.hosts:
        from trainium_lens.targets.nodes.hosts import HostsTarget

        return HostsTarget(where)
    if where.slurm:
        from trainium_lens.targets.nodes.slurm import SlurmTarget

        return SlurmTarget(where)
    if where.host is None:
        from trainium_lens.targets.local import LocalTarget

        return LocalTarget(python=where.python)
    from trainium_lens.targets.ssh.target import SshTarget

    return SshTarget(
        where.host, ssh_config=where.ssh_config, remote_python=where.remote_python, work_dir=where.work_dir
    )

"""Where the harness runs: this machine (``local``) or a host over OpenSSH."""

from __future__ import annotations

from trainium_lens.targets.base import Target


def make_target(
    host: str | None = None,
    *,
    python: str | None = None,
    ssh_config: str | None = None,
    remote_python: str | None = None,
    work_dir: str | None = None,
) -> Target:
    """``host`` None or "local": a subprocess here; anything else: an SSH host
    as the user's ``~/.ssh/config`` (or ``ssh_config``) names it."""
    if not host or host == "local":
        from trainium_lens.targets.local import LocalTarget

        return LocalTarget(python=python)
    from trainium_lens.targets.ssh.target import SshTarget

    return SshTarget(host, ssh_config=ssh_config, remote_python=remote_python, work_dir=work_dir)

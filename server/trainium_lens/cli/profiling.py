"""A profile job run from the command line (``profile``, ``check``): on the target
the arguments name (``add_target_arguments``, ``add_nodes_arguments``), with the
progress line on stderr and SIGTERM/SIGHUP stopping it, its errors one line."""

from __future__ import annotations

import argparse
import sys

from trainium_lens.cli.common import hosts_list
from trainium_lens.cli.console import Progress
from trainium_lens.cli.signals import stopping_on_signals
from trainium_lens.engine import runner
from trainium_lens.errors import HarnessError, LensError, NotStored, UsageError
from trainium_lens.model.job import Job
from trainium_lens.model.result import Result
from trainium_lens.model.store import RunStore
from trainium_lens.targets import make_target
from trainium_lens.targets.base import Target


def one_line(err: LensError) -> LensError:
    """The same error with a one-line message; a user-code error names the user's line."""
    message = " ".join(str(err).split())
    if isinstance(err, HarnessError):
        if (
            err.kind in ("user_code", "inputs")
            and err.file
            and err.line
            and f"{err.file}:{err.line}" not in message
        ):
            message = f"{err.file}:{err.line}: {message}"
    err.args = (message,)  # str(err) is args[0]; kind, file, line... stay
    return err


def job_target(args: argparse.Namespace) -> Target:
    """The target the arguments name: one host (``--host``, default local), several
    over SSH (``--hosts``) or a SLURM allocation (``--slurm``)."""
    hosts = getattr(args, "hosts", None)
    slurm = getattr(args, "slurm", None)
    if sum(bool(x) for x in (hosts, slurm, args.host)) > 1:
        raise UsageError("use one of --host, --hosts and --slurm")
    if getattr(args, "nodes", None) is not None and not slurm:
        raise UsageError("--nodes goes with --slurm (with --hosts, the hosts are the nodes)")
    if hosts:
        from trainium_lens.targets.hosts import HostsTarget

        return HostsTarget(
            hosts_list(hosts),
            ssh_config=args.ssh_config,
            remote_python=args.remote_python,
            work_dir=args.work_dir,
            ifname=args.ifname,
            join_timeout_s=args.join_timeout,
            pg_timeout_s=args.pg_timeout,
            node_timeout_s=args.node_timeout,
        )
    if slurm:
        from trainium_lens.targets.slurm import SlurmTarget, slurm_request

        return SlurmTarget(
            slurm,
            slurm_request(args),
            ssh_config=args.ssh_config,
            remote_python=args.remote_python,
            work_dir=args.work_dir,
        )
    return make_target(
        args.host,
        python=args.python,
        ssh_config=args.ssh_config,
        remote_python=args.remote_python,
        work_dir=args.work_dir,
    )


def profile_job(
    job: Job, args: argparse.Namespace, store: RunStore | None
) -> tuple[list[Result], NotStored | None]:
    """Run ``job`` on the target the arguments name (``add_target_arguments``), with
    the progress line on stderr and SIGTERM/SIGHUP stopping it: shared with ``check``.
    A run that finished but could not be stored comes back with why (``NotStored``):
    the caller shows its results first."""
    target = job_target(args)
    progress = Progress(sys.stderr)
    progress.status(f"starting the harness on {target.host}")
    not_stored: NotStored | None = None
    try:
        with stopping_on_signals():
            results = runner.profile(job, target, progress, timeout=args.timeout, store=store)
            if store is None:  # not stored: no result will ever name the run folder (the tables are out)
                runner.remove_own_folder(job, target)
    except NotStored as err:  # the run finished: its tables first, then why it is not kept
        results, not_stored = err.results, err
    except LensError as err:
        raise one_line(err) from None
    finally:
        progress.close()
        target.close()
    return results, not_stored

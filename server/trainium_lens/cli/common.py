"""Arguments the subcommands that work on stored runs share."""

from __future__ import annotations

import argparse
from pathlib import Path

from trainium_lens.model.job import workspace_root_for

RUN_HELP = "a run id (or unique prefix), or a result .json"
PROTOCOL_HELP = {
    "wait": "steps run before the profiler records (default 2)",
    "warmup": "steps recorded but discarded (default 1)",
    "active": "measured steps; figures are their per-step average (default 5)",
    "timing_calls": "unprofiled calls timed after profiling (default 20)",
}


def add_run_arguments(
    p: argparse.ArgumentParser,
    run_help: str = RUN_HELP,
    *,
    ssh_config_help: str | None = "ssh config file to use",
) -> None:
    """``RUN_ID``, ``--workspace`` and (unless None) ``--ssh-config``."""
    p.add_argument("run", metavar="RUN_ID", help=run_help)
    add_workspace_argument(p)
    if ssh_config_help:
        p.add_argument("--ssh-config", metavar="PATH", help=ssh_config_help)


def add_verbose_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="every row of the long sections (an xla run's fusions and HLO instructions; "
        "the default shows the top ones and says how many more)",
    )


def add_workspace_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--workspace",
        metavar="DIR",
        help="workspace whose runs to look in (default: the current git work tree)",
    )


def workspace_path(workspace: str | None) -> Path:
    """``--workspace`` resolved, else the git work tree of the current folder."""
    return Path(workspace).expanduser().resolve() if workspace else workspace_root_for(Path.cwd())


def add_target_arguments(p: argparse.ArgumentParser, verb: str) -> None:
    """Where the harness runs: ``--host`` and the options that go with it, the
    same for every command that starts the harness (``verb``: what it does there)."""
    p.add_argument(
        "--host", metavar="HOST", help=f"{verb} this SSH host (as ~/.ssh/config names it); default local"
    )
    p.add_argument("--ssh-config", metavar="PATH", help="ssh config file to use")
    p.add_argument("--remote-python", metavar="PATH", help="python on the SSH host")
    p.add_argument("--work-dir", metavar="DIR", help="work dir on the SSH host")
    p.add_argument("--python", metavar="PATH", help="local python with torch (default: this interpreter)")


def add_nodes_arguments(p: argparse.ArgumentParser) -> None:
    """A job across nodes (docs/nodes.md): over SSH (``--hosts``) or through SLURM
    (``--slurm``); both take ``--nproc`` as the ranks per node."""
    g = p.add_argument_group("across nodes (docs/nodes.md)")
    g.add_argument(
        "--hosts",
        metavar="H1,H2,...",
        help="run one torchrun per SSH host (the first hosts the rendezvous); --nproc ranks on each",
    )
    g.add_argument("--slurm", metavar="LOGIN_HOST", help="submit through SLURM from this SSH login host")
    g.add_argument("--nodes", type=int, metavar="N", help="with --slurm: the number of nodes (default 2)")
    g.add_argument("--partition", metavar="NAME", help="with --slurm: the partition")
    g.add_argument(
        "--time", dest="slurm_time", metavar="LIMIT", help="with --slurm: the time limit (e.g. 10:00)"
    )
    g.add_argument("--account", metavar="NAME", help="with --slurm: the account to charge")
    g.add_argument(
        "--slurm-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="with --slurm: one more srun option (e.g. --exclusive); repeatable",
    )
    g.add_argument(
        "--ifname",
        metavar="IFACE",
        help="the nodes' cluster interface (GLOO_SOCKET_IFNAME/NCCL_SOCKET_IFNAME; its address "
        "is each node's --local-addr; default: the host name's address)",
    )
    g.add_argument(
        "--join-timeout",
        type=int,
        default=60,
        metavar="SECONDS",
        help="how long a node waits for the others to join (default 60)",
    )
    g.add_argument(
        "--pg-timeout",
        type=int,
        default=120,
        metavar="SECONDS",
        help="how long a rank waits in a collective for the others (default 120)",
    )
    g.add_argument(
        "--node-timeout",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="a node silent this long over SSH is named as gone and the job stopped (default 10)",
    )


def hosts_list(text: str) -> list[str]:
    from trainium_lens.errors import UsageError

    hosts = [h.strip() for h in text.split(",") if h.strip()]
    if not hosts:
        raise UsageError("--hosts needs at least one host (h1,h2,...)")
    if len(set(hosts)) != len(hosts):
        raise UsageError(f"--hosts names a host twice: {text}")
    return hosts

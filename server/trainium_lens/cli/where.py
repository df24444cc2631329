"""The options that say where a command runs, the same for every command, and the
one ``Where`` they make (``targets/where.py``; the language server makes its own
from its settings)."""

from __future__ import annotations

import argparse
from typing import Any

from trainium_lens.errors import UsageError
from trainium_lens.targets.where import NodeOptions, Where


def add_host_arguments(
    p: argparse.ArgumentParser,
    verb: str,
    *,
    python: bool = True,
    remote_python_help: str = "python on the SSH host",
) -> None:
    """``--host`` and the options that go with it (``verb``: what the command does
    there); ``python``: the command starts the harness in a local Python."""
    p.add_argument(
        "--host", metavar="HOST", help=f"{verb} this SSH host (as ~/.ssh/config names it); default local"
    )
    add_ssh_config_argument(p)
    p.add_argument("--remote-python", metavar="PATH", help=remote_python_help)
    p.add_argument("--work-dir", metavar="DIR", help="work dir on the SSH host")
    if python:
        p.add_argument("--python", metavar="PATH", help="local python with torch (default: this interpreter)")


def add_ssh_config_argument(p: argparse.ArgumentParser, help: str = "ssh config file to use") -> None:
    """``--ssh-config``: also for the commands that reach the host a stored run names."""
    p.add_argument("--ssh-config", metavar="PATH", help=help)


def add_nodes_arguments(p: argparse.ArgumentParser, *, job: bool = True) -> None:
    """A job across nodes (docs/nodes.md): over SSH (``--hosts``) or through SLURM
    (``--slurm``); both take ``--nproc`` as the ranks per node. ``job`` False: the
    hosts and the interface only (``doctor`` checks them, it runs no job)."""
    g = p.add_argument_group("across nodes (docs/nodes.md)")
    g.add_argument(
        "--hosts",
        metavar="H1,H2,...",
        help="run one torchrun per SSH host (the first hosts the rendezvous); --nproc ranks on each"
        if job
        else "check these SSH hosts as the nodes of one job",
    )
    g.add_argument(
        "--slurm",
        metavar="LOGIN_HOST",
        help="submit through SLURM from this SSH login host"
        if job
        else "check this SLURM login host and its nodes",
    )
    g.add_argument(
        "--ifname",
        metavar="IFACE",
        help="the nodes' cluster interface (GLOO_SOCKET_IFNAME/NCCL_SOCKET_IFNAME; its address "
        "is each node's --local-addr; default: the host name's address)",
    )
    if not job:
        return
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


def where_from_args(args: argparse.Namespace) -> Where:
    """The ``Where`` a command's arguments name; options a command does not take
    keep their defaults (``fetch`` has no ``--host``: it goes where the run was)."""

    def arg(name: str, default: Any = None) -> Any:
        return getattr(args, name, default)

    hosts, slurm = arg("hosts"), arg("slurm")
    defaults = NodeOptions()
    node = NodeOptions(
        ifname=arg("ifname"),
        join_timeout_s=arg("join_timeout", defaults.join_timeout_s),
        pg_timeout_s=arg("pg_timeout", defaults.pg_timeout_s),
        node_timeout_s=arg("node_timeout", defaults.node_timeout_s),
        nodes=arg("nodes"),
        partition=arg("partition"),
        time=arg("slurm_time"),
        account=arg("account"),
        slurm_args=tuple(arg("slurm_arg") or ()),
    )
    where = Where(
        host=arg("host") or None,
        hosts=tuple(hosts_list(hosts)) if hosts else (),
        slurm=slurm or None,
        python=arg("python"),
        ssh_config=arg("ssh_config"),
        remote_python=arg("remote_python"),
        work_dir=arg("work_dir"),
        node=node,
    )
    if node.nodes is not None and not where.slurm:
        raise UsageError("--nodes goes with --slurm (with --hosts, the hosts are the nodes)")
    return where


def hosts_list(text: str) -> list[str]:
    hosts = [h.strip() for h in text.split(",") if h.strip()]
    if not hosts:
        raise UsageError("--hosts needs at least one host (h1,h2,...)")
    return hosts  # a host named twice: the Where refuses it

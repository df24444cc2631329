"""One value for where a run happens (targets/where.py): the CLI's options make it
(cli/where.py), make_target (targets/make.py) turns it into the target that runs
there."""

from __future__ import annotations

import argparse

import pytest

from trainium_lens.cli.where import add_host_arguments, add_nodes_arguments, where_from_args
from trainium_lens.errors import UsageError
from trainium_lens.targets.local import LocalTarget
from trainium_lens.targets.make import make_target
from trainium_lens.targets.nodes.hosts import HostsTarget
from trainium_lens.targets.nodes.slurm import SlurmTarget
from trainium_lens.targets.ssh.target import SshTarget
from trainium_lens.targets.where import NodeOptions, Where


def parse(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_host_arguments(p, "profile on")
    add_nodes_arguments(p)
    return p.parse_args(list(argv))


def test_the_options_make_one_where_with_every_option_of_the_nodes():
    where = where_from_args(
        parse(
            *("--slurm", "login", "--nodes", "3", "--partition", "trn", "--time", "10:00"),
            *("--slurm-arg=--exclusive", "--ifname", "ens5", "--ssh-config", "cfg"),
            *("--remote-python", "/opt/py", "--work-dir", "/fsx/w"),
        )
    )
    assert where == Where(
        slurm="login",
        ssh_config="cfg",
        remote_python="/opt/py",
        work_dir="/fsx/w",
        node=NodeOptions(ifname="ens5", nodes=3, partition="trn", time="10:00", slurm_args=("--exclusive",)),
    )
    assert (where.kind, where.name) == ("slurm", "login")


def test_a_command_without_the_options_gets_this_machine():
    where = where_from_args(argparse.Namespace(workspace=None))  # fetch, fix: no --host
    assert where == Where() and where.kind == "local" and where.name == "local"


@pytest.mark.parametrize(
    "argv, said",
    [
        (("--host", "a", "--hosts", "b,c"), "use one of --host, --hosts and --slurm"),
        (("--hosts", "b,c", "--slurm", "login"), "use one of --host, --hosts and --slurm"),
        (("--hosts", "b,b"), "--hosts names a host twice: b,b"),
        (("--hosts", " , "), "--hosts needs at least one host"),
        (("--hosts", "b,c", "--nodes", "2"), "--nodes goes with --slurm"),
    ],
)
def test_options_that_contradict_each_other_are_refused_in_one_line(argv, said):
    with pytest.raises(UsageError, match="^" + said.replace("+", r"\+")):
        where_from_args(parse(*argv))


def test_local_is_this_machine_and_at_keeps_the_connection_options():
    assert Where(host="local") == Where(host="") == Where()
    where = Where(hosts=("n1", "n2"), ssh_config="cfg", work_dir="/w", node=NodeOptions(ifname="e"))
    assert where.at("n2") == Where(host="n2", ssh_config="cfg", work_dir="/w", node=NodeOptions(ifname="e"))
    assert where.at("local").kind == "local"


def test_make_target_builds_the_target_each_kind_names():
    local = make_target(Where(python="/opt/bin/python3"))
    assert isinstance(local, LocalTarget) and local.python == "/opt/bin/python3"
    ssh = make_target(Where(host="trn1", remote_python="/opt/py", work_dir="/w"))
    assert isinstance(ssh, SshTarget)
    assert (ssh.host, ssh.remote_python, ssh.work_dir) == ("trn1", "/opt/py", "/w")
    hosts = make_target(
        Where(hosts=("n1", "n2"), remote_python="/opt/py", node=NodeOptions(ifname="e", pg_timeout_s=9))
    )
    assert isinstance(hosts, HostsTarget)
    assert [n.host for n in hosts.nodes] == ["n1", "n2"] and hosts.host == "n1"
    assert (hosts.ifname, hosts.pg_timeout_s, hosts.nodes[1].remote_python) == ("e", 9, "/opt/py")
    slurm = make_target(Where(slurm="login", node=NodeOptions(nodes=4, account="acct", slurm_args=("-x",))))
    assert isinstance(slurm, SlurmTarget) and slurm.host == "login"
    assert {k: slurm.request[k] for k in ("nodes", "account", "args")} == {
        "nodes": 4,
        "account": "acct",
        "args": ["-x"],
    }
    for target in (local, ssh, hosts, slurm):
        target.close()


def test_the_slurm_request_is_checked_where_it_is_made():
    with pytest.raises(UsageError, match="--nodes must be at least 1, got 0"):
        make_target(Where(slurm="login", node=NodeOptions(nodes=0)))
    with pytest.raises(UsageError, match="--slurm-arg takes srun options"):
        make_target(Where(slurm="login", node=NodeOptions(slurm_args=("exclusive",))))

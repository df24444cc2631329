"""One value for where a run happens (targets/where.py): the CLI's options make it
(cli/where.py), make_target (targets/make.py) turns it into the target that runs
there, and that target picks a script run's folder (Target.run_script)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pytest

from trainium_lens.cli.where import add_host_arguments, add_nodes_arguments, where_from_args
from trainium_lens.errors import TargetError, UsageError
from trainium_lens.harness.spec import ScriptSpec
from trainium_lens.model.job import workspace_id
from trainium_lens.model.script import ScriptCommand
from trainium_lens.targets import script
from trainium_lens.targets.local import LocalTarget, cache_root
from trainium_lens.targets.make import make_target
from trainium_lens.targets.nodes.hosts import HostsTarget
from trainium_lens.targets.nodes.slurm import SlurmTarget
from trainium_lens.targets.outcome import Outcome
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


def test_the_local_target_picks_a_script_runs_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAINIUM_LENS_CACHE", str(tmp_path / "cache"))
    seen: dict = {}

    def fake(argv, cwd, spec, run_dir, *rest):
        seen.update(argv=argv, cwd=cwd, spec=spec, run_dir=run_dir)
        return Outcome(returncode=0)

    monkeypatch.setattr(script, "run_script", fake)
    command = ScriptCommand([sys.executable, "train.py"], "python")
    spec = ScriptSpec(
        batch_id="20260101-000000-abcdef", workspace_root=str(tmp_path), run_dir="", command=("train.py",)
    )
    LocalTarget().run_script(command, spec, lambda _e: None, workspace=tmp_path, cwd=tmp_path)
    expected = cache_root() / workspace_id(tmp_path) / "runs" / "20260101-000000-abcdef"
    assert seen["run_dir"] == expected and seen["spec"].run_dir == str(expected)
    assert str(expected).startswith(str(tmp_path / "cache"))
    assert spec.run_dir == ""  # the caller's spec is left as it was
    assert seen["argv"] == [sys.executable, "train.py"] and seen["cwd"] == Path(tmp_path)


@pytest.mark.parametrize("where", [Where(hosts=("n1", "n2")), Where(slurm="login")])
def test_the_targets_across_nodes_refuse_a_script_run_in_one_line(where, tmp_path):
    target = make_target(where)
    command = ScriptCommand([sys.executable, "train.py"], "python")
    with pytest.raises(TargetError, match="across nodes, run your own srun or torchrun command"):
        spec = ScriptSpec(batch_id="b", workspace_root=str(tmp_path), run_dir="", command=("train.py",))
        target.run_script(command, spec, lambda _e: None, workspace=tmp_path, cwd=tmp_path)
    target.close()

"""The two-node lab itself (scripts/lab-nodes.sh): real hosts by ssh, a network
between the nodes, private homes, slurm that runs and cancels multi-node jobs,
a gloo job across the nodes, and nothing listening outside the lab."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from tests.support.lab import IFNAME, REPO_PYTHON, Lab
from tests.support.procs import wait_for

pytestmark = pytest.mark.nodes

# Processes a lab host runs with no job: the namespace holder, sshd, the daemons.
IDLE = re.compile(r"^(sleep infinity|/usr/sbin/sshd |sshd: |munged |slurmctld|slurmscriptd|slurmd)")


def _listeners() -> dict[tuple[str, int], set[int]]:
    """(proto, port) -> socket inodes of what listens in the root namespace
    (this process's), from /proc/net: TCP in LISTEN, every bound UDP socket."""
    out: dict[tuple[str, int], set[int]] = {}
    for proto, state in (("tcp", "0A"), ("tcp6", "0A"), ("udp", "07"), ("udp6", "07")):
        try:
            lines = Path(f"/proc/net/{proto}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if f[3] == state:
                out.setdefault((proto, int(f[1].rsplit(":", 1)[1], 16)), set()).add(int(f[9]))
    return out


def _owners(inodes: set[int]) -> dict[int, str]:
    """pid -> command line of each process holding one of these sockets."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fds = os.listdir(f"/proc/{entry}/fd")
            links = {os.readlink(f"/proc/{entry}/fd/{fd}") for fd in fds}
        except OSError:
            continue
        if any(f"socket:[{i}]" in links for i in inodes):
            found[int(entry)] = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    return found


def _lab_processes(*roots: int) -> set[int]:
    """The lab's processes seen from here: ROOTS, every process the lab script
    started (its pid files, or its folder on the command line: the daemons'
    configs live there) and all their descendants. Other tests of this machine
    (a loopback sshd, a local torchrun) are not the lab's and do not count."""
    lab_dir = Path(os.environ.get("LAB_DIR") or Path.home() / ".cache" / "trainium-lens" / "lab")
    seeds = set(roots)
    for pidfile in (lab_dir / "run").glob("*.pid"):
        try:
            seeds.add(int(pidfile.read_text().split()[0]))
        except (OSError, ValueError, IndexError):
            pass
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        children.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(entry))
        if str(lab_dir) in cmd:
            seeds.add(int(entry))
    found, todo = set(), list(seeds)
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo.extend(children.get(pid, []))
    return found


# Taken when this module is imported, i.e. before the session's lab comes up.
LISTENING_BEFORE = _listeners()


def test_each_host_has_its_own_name(lab: Lab):
    for host in [lab.login, *lab.hosts]:
        res = lab.run(host, "hostname")
        assert (res.returncode, res.stdout.strip()) == (0, host), res.stderr


def test_node1_reaches_node2_by_name(lab: Lab):
    port = 45123
    server = (
        "import socket\n"
        "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
        f"s.bind(('0.0.0.0', {port})); s.listen(1); s.settimeout(20); print('ready', flush=True)\n"
        "c, peer = s.accept(); c.sendall(('hello from ' + socket.gethostname()).encode()); c.close()\n"
    )
    listener = subprocess.Popen(
        lab.ssh_argv("node2", f"{REPO_PYTHON} -c {shlex.quote(server)}"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    try:
        assert listener.stdout is not None
        assert listener.stdout.readline().strip() == "ready", (
            listener.stderr.read() if listener.stderr else ""
        )
        client = (
            "import socket\n"
            "print(socket.gethostbyname('node2'))\n"
            f"c = socket.create_connection(('node2', {port}), timeout=10); print(c.recv(100).decode())\n"
        )
        res = lab.run("node1", f"{REPO_PYTHON} -c {shlex.quote(client)}", timeout=30)
        assert res.returncode == 0, res.stderr
        addr, greeting = res.stdout.split("\n")[:2]
        assert addr.startswith("10.") and greeting == "hello from node2"
        assert listener.wait(timeout=10) == 0
    finally:
        listener.kill()
        listener.wait()


def test_homes_are_private_but_the_cache_and_repo_are_shared(lab: Lab):
    name = f"lab-marker-{uuid.uuid4().hex[:8]}"
    assert lab.run("node1", f"echo hi > ~/{name}").returncode == 0
    assert lab.run("node1", f"cat ~/{name}").stdout == "hi\n"
    assert lab.run("node2", f"test -e ~/{name}").returncode == 1
    assert not (Path.home() / name).exists()
    # Only the home is private: the repository, its Python and ~/.cache are the machine's.
    for host in lab.hosts:
        res = lab.run(host, f"test -x {REPO_PYTHON} && test -d ~/.cache/trainium-lens && echo ok")
        assert res.stdout.strip() == "ok", (host, res.stderr)


def test_srun_runs_on_both_nodes(lab: Lab):
    res = lab.run(lab.login, "srun -N2 hostname", timeout=30)
    assert res.returncode == 0, res.stderr
    assert sorted(res.stdout.split()) == ["node1", "node2"]


GLOO = """\
import socket, torch, torch.distributed as dist
dist.init_process_group("gloo")
rank = dist.get_rank()
t = torch.tensor([float(rank)])
dist.all_reduce(t)
print(f"rank {rank} of {dist.get_world_size()} on {socket.gethostname()} sum {t.item():g}", flush=True)
dist.destroy_process_group()
"""


def test_gloo_torchrun_across_the_nodes(lab: Lab, tmp_path: Path):
    script = tmp_path / "allreduce.py"  # /tmp is the same on every node
    script.write_text(GLOO)
    torchrun = (
        f"GLOO_SOCKET_IFNAME={IFNAME} OMP_NUM_THREADS=1 {REPO_PYTHON} -m torch.distributed.run"
        " --nnodes 2 --nproc-per-node 2 --node-rank $SLURM_NODEID"
        " --master-addr node1 --master-port 29531"
        f" {script}"
    )
    cmd = f"srun -N2 --ntasks-per-node=1 --kill-on-bad-exit=1 bash -c {shlex.quote(torchrun)}"
    res = lab.run(lab.login, cmd, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    # srun interleaves the tasks' output, even within a line: find the records, not lines
    found = re.findall(r"rank (\d) of (\d) on (node\d) sum (\d+)", res.stdout)
    assert len(found) == 4, res.stdout + res.stderr
    assert sorted(r for r, *_ in found) == ["0", "1", "2", "3"]
    assert all(world == "4" and total == "6" for _r, world, _h, total in found), found
    assert sorted(h for _r, _w, h, _t in found) == ["node1", "node1", "node2", "node2"]


def test_scancel_leaves_no_job_and_no_process(lab: Lab):
    marker = f"lab-scancel-{uuid.uuid4().hex[:6]}"
    res = lab.run(lab.login, f"sbatch -N2 -J {marker} --wrap 'srun sleep 301'", timeout=20)
    assert res.returncode == 0, res.stderr
    job = res.stdout.split()[-1]

    def sleeping() -> bool:
        return all(any("sleep 301" in c for c in lab.procs_on(h).values()) for h in lab.hosts)

    wait_for(sleeping, 20, "the job's sleep on both nodes")
    assert lab.run(lab.login, f"scancel {job}").returncode == 0
    wait_for(lambda: not lab.squeue(), 15, "squeue empty after scancel")

    def leftovers() -> list[str]:
        return [f"{h}: {c}" for h in lab.hosts for c in lab.procs_on(h).values() if not IDLE.match(c)]

    deadline = time.monotonic() + 10
    while leftovers() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not leftovers()


def test_nothing_new_listens_in_the_root_namespace(lab: Lab):
    # An ssh session through the ProxyCommand is open while we look.
    with subprocess.Popen(lab.ssh_argv("node1", "sleep 5"), stdin=subprocess.DEVNULL) as held:
        time.sleep(1)
        now = _listeners()
        lab_pids = _lab_processes(held.pid)
        held.kill()
    new = {key: inodes for key, inodes in now.items() if key not in LISTENING_BEFORE}
    # Other tests of this machine open ports meanwhile: only what a lab process
    # owns counts (the lab's daemons, the ssh session and its ProxyCommand, slurm steps).
    ours = {
        key: own
        for key, inodes in new.items()
        for own in [{pid: cmd for pid, cmd in _owners(inodes).items() if pid in lab_pids}]
        if own
    }
    assert not ours, ours

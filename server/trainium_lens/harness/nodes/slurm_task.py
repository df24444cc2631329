"""One SLURM task of a job across nodes: ``python -m
trainium_lens.harness.nodes.slurm_task NODE_SPEC`` (run by ``srun``, one per node;
stdlib only).

It completes the node's place in the job from SLURM's environment (node rank
``$SLURM_NODEID``, the allocation's first node as the rendezvous address, this
node's own address), gives the node a run folder of its own
(``<run_dir>/node<k>``) and becomes the harness with that spec on stdin; the
harness launches the node's ranks (``torchrun/launch.py``).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time


def first_node() -> str:
    """The allocation's first host name (``scontrol show hostnames`` expands
    ``node[1-2]``-style lists)."""
    nodelist = os.environ.get("SLURM_JOB_NODELIST") or os.environ.get("SLURM_NODELIST") or ""
    try:
        out = subprocess.run(
            ["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True, timeout=20
        ).stdout.split()
    except (OSError, subprocess.TimeoutExpired):
        out = []
    return out[0] if out else nodelist.split(",")[0]


def address_of(ifname: str | None, host: str | None = None) -> str:
    """An IPv4 address: of ``host`` by name, or this host's on ``ifname``."""
    if host is not None:
        return socket.gethostbyname(host)
    if ifname:
        try:
            out = subprocess.run(
                ["ip", "-4", "-o", "addr", "show", "dev", ifname], capture_output=True, text=True, timeout=10
            ).stdout.split()
            if "inet" in out:
                return out[out.index("inet") + 1].split("/")[0]
        except (OSError, subprocess.TimeoutExpired):
            pass
    return socket.gethostbyname(socket.gethostname())


def node_spec(data: dict) -> dict:
    nodes = dict(data["nodes"])
    node_rank = int(os.environ.get("SLURM_NODEID", "0"))
    nodes["node_rank"] = node_rank
    nodes["master_addr"] = address_of(None, first_node())
    nodes["local_addr"] = address_of(nodes.get("ifname"))
    out = dict(data)
    out["nodes"] = nodes
    out["run_dir"] = os.path.join(str(data["run_dir"]), f"node{node_rank}")
    return out


def start_heartbeat(path: str) -> None:
    """A child that rewrites a counter in ``path`` every second while this task
    lives (the login host's harness takes a node whose counter stops for dead:
    harness/nodes/slurm.py). It dies with the task: ``PR_SET_PDEATHSIG``, and it checks
    its parent; the harness this task becomes sweeps it at its end (reaper.py)."""
    if os.fork() != 0:
        return
    try:
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    parent, n = os.getppid(), 0
    while os.getppid() == parent:
        n += 1
        try:
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(str(n))
        except OSError:
            pass
        time.sleep(1.0)
    os._exit(0)


def main(path: str) -> None:
    with open(path, encoding="utf-8") as handle:
        data = json.load(handle)
    node_rank = int(os.environ.get("SLURM_NODEID", "0"))
    start_heartbeat(os.path.join(str(data["run_dir"]), f"node{node_rank}.alive"))
    text = json.dumps(node_spec(data))
    read, write = os.pipe()
    os.write(write, text.encode("utf-8"))  # well below a pipe's buffer
    os.close(write)
    os.dup2(read, 0)
    os.close(read)
    os.chdir(str(data["workspace_root"]))
    os.execv(sys.executable, [sys.executable, "-m", "trainium_lens.harness"])


if __name__ == "__main__":
    main(sys.argv[1])

"""One node of a job across hosts: the torchrun command line and environment
for it (stdlib only; runs on the node).

A job spec's ``nodes`` object says where this node stands in the job::

    {"nnodes": 2, "node_rank": 1, "master_addr": "10.0.0.11", "master_port": 24817,
     "rdzv_id": "<batch id>", "local_addr": "10.0.0.12", "ifname": "lab0",
     "join_timeout_s": 60, "pg_timeout_s": 60, "node": "node2"}

``node_rank`` and ``master_addr`` may be left out under SLURM: the task fills
them from ``$SLURM_NODEID`` and the allocation's first node (``slurm_task.py``).

``node_launch`` is the one place that turns that object into torchrun's
arguments and the variables every rank needs (the data-plane interface, the
Neuron collectives' variables on a Neuron backend): the profile launcher uses
it, and so can any other command that starts ranks on a node.
"""

from __future__ import annotations

import os
import socket
from typing import Any

#: torchrun's rendezvous backend for a job across nodes (``agent.py``): torch's
#: static rendezvous whose store listens on the first node's cluster address only.
BOUND_BACKEND = "lens-bound"
#: Where the store binds on the first node (set by ``node_launch``).
BIND_ENV = "TRAINIUM_LENS_RDZV_BIND"
#: Seconds ``init_process_group`` and every collective wait for the other ranks.
PG_TIMEOUT_ENV = "TRAINIUM_LENS_PG_TIMEOUT_S"
DEFAULT_JOIN_TIMEOUT_S = 60
DEFAULT_PG_TIMEOUT_S = 120
#: The Neuron runtime's root communicator port (torch-xla's default under torchrun).
NEURON_ROOT_COMM_PORT = 62182


def check_nodes(nodes: Any) -> str | None:
    """Why a spec's ``nodes`` object is unusable, or None."""
    if not isinstance(nodes, dict):
        return "'nodes' must be an object"
    nnodes = nodes.get("nnodes")
    if not isinstance(nnodes, int) or isinstance(nnodes, bool) or nnodes < 1:
        return "'nodes.nnodes' must be a positive integer"
    port = nodes.get("master_port")
    if not isinstance(port, int) or not 0 < port < 65536:
        return "'nodes.master_port' must be a port number"
    rank = nodes.get("node_rank")
    if rank is not None and (not isinstance(rank, int) or not 0 <= rank < nnodes):
        return "'nodes.node_rank' must be an integer below nnodes"
    for key in ("master_addr", "local_addr", "ifname", "rdzv_id", "node"):
        if nodes.get(key) is not None and not isinstance(nodes.get(key), str):
            return f"'nodes.{key}' must be a string"
    return None


def node_name(nodes: dict) -> str:
    return str(nodes.get("node") or socket.gethostname())


def node_launch(nodes: dict, nproc: int, log_dir: str, backend: str = "auto") -> tuple[list[str], dict]:
    """(torchrun arguments, environment updates) for this node of the job.

    The arguments follow ``-m trainium_lens.harness.torchrun.agent`` (or any
    ``torchrun``-compatible entry registering ``BOUND_BACKEND``); the caller
    appends what each rank runs."""
    master = str(nodes["master_addr"])
    port = int(nodes["master_port"])
    node_rank = int(nodes.get("node_rank") or 0)
    join = int(nodes.get("join_timeout_s") or DEFAULT_JOIN_TIMEOUT_S)
    args = [
        f"--rdzv-backend={BOUND_BACKEND}",
        f"--rdzv-endpoint={master}:{port}",
        f"--rdzv-id={nodes.get('rdzv_id') or 'trainium-lens'}",
        f"--rdzv-conf=rank={node_rank},timeout={join}",
        f"--nnodes={int(nodes['nnodes'])}",
        f"--node-rank={node_rank}",
        f"--nproc-per-node={nproc}",
        f"--log-dir={log_dir}",
        "--max-restarts=0",
        "--monitor-interval=0.5",
    ]
    local = nodes.get("local_addr")
    if local:
        args.append(f"--local-addr={local}")
    env: dict[str, str] = {
        # The store binds here on the first node (not every interface: it is
        # unauthenticated); the other nodes connect to ``master_addr``.
        BIND_ENV: str(local or master) if node_rank == 0 else "",
        PG_TIMEOUT_ENV: str(int(nodes.get("pg_timeout_s") or DEFAULT_PG_TIMEOUT_S)),
        "TORCHELASTIC_ERROR_FILE": os.path.join(log_dir, "error.json"),
    }
    ifname = nodes.get("ifname")
    if ifname:
        env["GLOO_SOCKET_IFNAME"] = str(ifname)
        env["NCCL_SOCKET_IFNAME"] = str(ifname)
    if backend == "neuron" or (backend == "auto" and _has_neuron()):
        env.update(neuron_env(master))
    return args, env


def neuron_env(master_addr: str) -> dict[str, str]:
    """The Neuron collectives across nodes (docs/neuron.md): EFA as the libfabric
    provider with device RDMA, and the root communicator on the first node, which
    every node must reach. A user's own values win (``setdefault`` at the caller)."""
    return {
        "FI_PROVIDER": os.environ.get("FI_PROVIDER", "efa"),
        "FI_EFA_USE_DEVICE_RDMA": os.environ.get("FI_EFA_USE_DEVICE_RDMA", "1"),
        "NEURON_RT_ROOT_COMM_ID": os.environ.get(
            "NEURON_RT_ROOT_COMM_ID", f"{master_addr}:{NEURON_ROOT_COMM_PORT}"
        ),
    }


def _has_neuron() -> bool:
    return any(name.startswith("neuron") for name in _listdir("/dev"))


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []

"""torchrun's agent for a ``--nproc N`` job: ``python -m
trainium_lens.harness.torchrun.agent TORCHRUN_ARGS...``, started by
``launch.py``. It is ``torch.distributed.run`` itself, with two things torchrun
does not do by itself:

* **It dies with the launcher.** ``PR_SET_PDEATHSIG`` before torch is imported
  (nothing can have forked yet), then the launcher's pid, recorded in
  ``LAUNCHER_PID_ENV`` when it started us, is compared with our parent's: a
  launcher that died before the call is caught too (``harness/runtime/lifeline.py``).
  Our own pid goes to the ranks in ``AGENT_PID_ENV`` for the same check (torchrun
  starts each rank in a session of its own, out of reach of a group kill).
* **Its rendezvous listens on loopback only.** ``--standalone`` makes the
  agent's ``TCPStore`` (unauthenticated; elastic state in it is pickled) listen
  on every interface, whatever endpoint is named. A single-node job needs no
  other host, so the ``lens-loopback`` rendezvous backend registered here is
  torch's static rendezvous whose store serves a socket bound to ``127.0.0.1``
  (``TCPStore(master_listen_fd=...)``). The ranks connect to it as clients
  (``use_agent_store``: no rank starts a store of its own), and gloo's data
  connections use the loopback interface (``GLOO_SOCKET_IFNAME=lo`` unless the
  user set one).

Imports torch (this process is torchrun), but only after the death signal is set.
"""

from __future__ import annotations

import os
import socket
import sys

from trainium_lens.harness.nodes.launch import BIND_ENV, BOUND_BACKEND
from trainium_lens.harness.runtime.lifeline import die_with_parent, parent_from_env

LAUNCHER_PID_ENV = "TRAINIUM_LENS_LAUNCHER_PID"
AGENT_PID_ENV = "TRAINIUM_LENS_AGENT_PID"
BACKEND = "lens-loopback"
RDZV_TIMEOUT_S = 600  # torch's static rendezvous default
LOOPBACK = "127.0.0.1"


def torchrun_args(nproc: int, log_dir: str) -> list[str]:
    """What follows ``-m trainium_lens.harness.torchrun.agent``: one node, the
    loopback rendezvous, torchrun's logs in the run folder (not a
    ``torchelastic_*`` folder left in the temp dir per run)."""
    return [
        f"--rdzv-backend={BACKEND}",
        f"--rdzv-endpoint={LOOPBACK}:0",  # unused by the backend; silences torchrun's master_addr note
        "--nnodes=1",
        f"--nproc-per-node={nproc}",
        f"--log-dir={log_dir}",
        "-m",
        "trainium_lens.harness",
    ]


def _loopback_rendezvous(params):
    import datetime

    from torch.distributed import TCPStore
    from torch.distributed.elastic.rendezvous.static_tcp_rendezvous import StaticTCPRendezvous

    class LoopbackRendezvous(StaticTCPRendezvous):
        def get_backend(self) -> str:
            return BACKEND

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((LOOPBACK, 0))
    sock.listen(128)
    port = sock.getsockname()[1]
    # The store owns the descriptor from here (closing it under the store's
    # daemon would abort the process): detach it from the socket object.
    store = TCPStore(
        LOOPBACK,
        port,
        params.max_nodes,
        True,
        datetime.timedelta(seconds=RDZV_TIMEOUT_S),
        multi_tenant=True,
        master_listen_fd=sock.detach(),
        use_libuv=False,
    )
    handler = LoopbackRendezvous(LOOPBACK, port, 0, params.max_nodes, params.run_id, RDZV_TIMEOUT_S)
    handler._store = store  # the static handler's own store, made above
    return handler


def _bound_rendezvous(params):
    """A job across nodes: torch's static rendezvous, but the first node's store
    listens on one address (``nodes.BIND_ENV``: its cluster address), not on
    every interface; the other nodes' agents connect to the endpoint as clients,
    waiting at most the join timeout (``--rdzv-conf timeout=``)."""
    import datetime

    from torch.distributed import TCPStore
    from torch.distributed.elastic.rendezvous.static_tcp_rendezvous import StaticTCPRendezvous
    from torch.distributed.elastic.rendezvous.utils import parse_rendezvous_endpoint

    class BoundRendezvous(StaticTCPRendezvous):
        def get_backend(self) -> str:
            return BOUND_BACKEND

    master, port = parse_rendezvous_endpoint(params.endpoint, -1)
    node_rank = int(params.config.get("rank", 0))
    timeout = int(params.config.get("timeout", RDZV_TIMEOUT_S))
    handler = BoundRendezvous(master, port, node_rank, params.max_nodes, params.run_id, timeout)
    if node_rank == 0:
        bind = os.environ.get(BIND_ENV) or master
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((bind, port))
        except OSError as exc:
            raise RuntimeError(f"cannot listen on {bind}:{port} for the rendezvous: {exc.strerror}") from None
        sock.listen(128)
        handler._store = TCPStore(
            master,
            port,
            params.max_nodes,
            True,
            datetime.timedelta(seconds=timeout),
            multi_tenant=True,
            master_listen_fd=sock.detach(),
            use_libuv=False,
        )
    return handler


def main(argv: list[str]) -> None:
    die_with_parent(parent_from_env(LAUNCHER_PID_ENV))
    os.environ[AGENT_PID_ENV] = str(os.getpid())
    across_nodes = f"--rdzv-backend={BOUND_BACKEND}" in argv
    if sys.platform.startswith("linux") and not across_nodes:
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    from torch.distributed import run
    from torch.distributed.elastic.rendezvous import registry

    registry.handler_registry.register(BACKEND, _loopback_rendezvous)
    registry.handler_registry.register(BOUND_BACKEND, _bound_rendezvous)
    run.main(argv)


if __name__ == "__main__":
    main(sys.argv[1:])

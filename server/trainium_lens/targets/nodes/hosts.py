"""A job across hosts over the user's OpenSSH (``--hosts h1,h2 --nproc P``).

Each host is an ordinary ``SshTarget`` (its own ControlMaster, sync, harness
install and lifeline: the run on a host stops when its ssh ends), given its
place in the job (``Job.nodes``, harness/nodes/launch.py): node rank, the first host's
cluster address and a port there for the rendezvous, a per-run rendezvous id,
its own address (``--local-addr``), short join and process-group timeouts.

1. ``probe`` (one round trip per host, in parallel): host name, the address
   of the data-plane interface (``--ifname``) or of the host name, its clock;
2. every host runs its node of the job; their events come through one sink,
   each tagged with its host;
3. while they run, each host is asked every ``WATCH_EVERY_S`` over its
   master; one that has not answered for ``node_timeout_s`` is named as gone
   (a dead node, a partition) and the job is stopped on every host;
4. the first failure stops the others; the error named is the node that went
   away before the peers that noticed it (their "connection closed" follows);
5. each host's batch comes back over its own SSH connection (no shared
   filesystem assumed); their ``rank_batches`` become one document that
   ``model/ranks.py`` merges.

Work dirs are per host (``<work dir>/node-<host>``): a home shared between
nodes (NFS on most clusters) must not give two nodes one lock or one run folder.
"""

from __future__ import annotations

import dataclasses
import math
import random
import threading
import time
from pathlib import Path

from trainium_lens.errors import Cancelled, HarnessError, LensError, TargetError, TimedOut
from trainium_lens.model.job import Job, workspace_id
from trainium_lens.targets.base import EventSink, Target
from trainium_lens.targets.ssh.target import SshTarget
from trainium_lens.targets.where import Where

#: How often a running node is asked whether it is still there.
WATCH_EVERY_S = 2.0
#: After the first failure, how long the others may take to say theirs (the
#: cause, a dead node, can come a moment after a peer's dropped connection).
BLAME_GRACE_S = 3.0
#: Rendezvous ports are drawn from here (below Linux's ephemeral range).
PORT_RANGE = (20000, 32000)

# $1 the data-plane interface ("" = the host name's address).
PROBE = r"""
echo "name=$(hostname)"
if [ -n "$1" ]; then
  a=$(ip -4 -o addr show dev "$1" 2>/dev/null | awk '{print $4}' | cut -d/ -f1 | head -n1)
else
  a=$(getent hosts "$(hostname)" 2>/dev/null | awk '{print $1}' | head -n1)
fi
echo "addr=$a"
echo "clock=$(date +%s.%N)"
"""


@dataclasses.dataclass
class NodeInfo:
    host: str  # as the user named it (ssh alias)
    name: str  # its host name
    addr: str  # its cluster address
    offset_s: float  # its clock minus ours
    uncertainty_s: float  # half the probe's round trip


def _peerish(message: str) -> bool:
    low = message.lower()
    return any(w in low for w in ("connection", "peer", "gloo", "socket", "timed out", "closed"))


#: ``_cause``'s classes, the likeliest cause first.
GONE, OWN, PEER = 0, 1, 2


def _cause(exc: BaseException) -> int:
    """How likely a node's failure is the job's cause: the node itself went away
    (``GONE``), a rank's own error (``OWN``), or a peer that noticed (``PEER``)."""
    if isinstance(exc, TargetError):
        return GONE
    if isinstance(exc, HarnessError) and not _peerish(str(exc)):
        return OWN
    return PEER


class HostsTarget(Target):
    def __init__(
        self, where: Where, *, master_addr: str | None = None, master_port: int | None = None
    ) -> None:
        """The nodes are ``where.hosts``; ``master_addr``/``master_port`` pin the
        rendezvous (default: the first node's address, a free-looking port)."""
        hosts = list(where.hosts)
        if len(hosts) < 1 or len(set(hosts)) != len(hosts):
            raise TargetError(f"--hosts needs distinct hosts, got {','.join(hosts)}")
        self.hosts = hosts
        self.host = hosts[0]  # rank 0's host: where the result's own artifacts are
        self.work_dir = where.work_dir
        self.ifname = where.node.ifname
        self.master_addr = master_addr
        self.master_port = master_port
        self.join_timeout_s = where.node.join_timeout_s
        self.pg_timeout_s = where.node.pg_timeout_s
        self.node_timeout_s = where.node.node_timeout_s
        self.nodes = [
            SshTarget(h, ssh_config=where.ssh_config, remote_python=where.remote_python) for h in hosts
        ]
        self.info: list[NodeInfo] = []
        #: Seconds per step of the last run (for bench/): gather = results over SSH + combine.
        self.timings: dict[str, float] = {}
        self.unreachable: set[str] = set()  # hosts that stopped answering during a run

    # -- before the run ------------------------------------------------------------
    def probe(self) -> list[NodeInfo]:
        """Every host's name, address and clock (in parallel); one line per failure."""
        out: list[NodeInfo | None] = [None] * len(self.nodes)
        errors: list[str] = []

        def one(k: int) -> None:
            node = self.nodes[k]
            try:
                node.conn.master()  # the connection's setup is not the clock's round trip
                t0 = time.time()
                proc = node.conn.run(PROBE, [self.ifname or ""], timeout=30)
                t1 = time.time()
            except LensError as exc:
                errors.append(str(exc) if str(exc).startswith(node.host) else f"{node.host}: {exc}")
                return
            fields = dict(
                ln.partition("=")[::2]
                for ln in proc.stdout.decode("utf-8", "replace").splitlines()
                if "=" in ln
            )
            if not fields.get("addr"):
                what = (
                    f"no IPv4 address on {self.ifname}" if self.ifname else "its host name does not resolve"
                )
                errors.append(f"{node.host}: {what} (pass --ifname with the cluster interface)")
                return
            try:
                clock = float(fields.get("clock", "nan"))
            except ValueError:
                clock = float("nan")
            out[k] = NodeInfo(
                node.host, fields.get("name", node.host), fields["addr"], clock - (t0 + t1) / 2, (t1 - t0) / 2
            )

        threads = [threading.Thread(target=one, args=(k,), daemon=True) for k in range(len(self.nodes))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise TargetError("; ".join(sorted(errors)))
        self.info = [i for i in out if i is not None]
        return self.info

    def node_jobs(self, job: Job) -> list[Job]:
        """The job as each host runs it: its place in the job (harness/nodes/launch.py)."""
        port = self.master_port or random.randint(*PORT_RANGE)
        master = self.master_addr or self.info[0].addr
        base = self.work_dir or f"~/.cache/trainium-lens/{workspace_id(job.workspace)}"
        jobs = []
        for k, (node, info) in enumerate(zip(self.nodes, self.info, strict=True)):
            node.work_dir = f"{base.rstrip('/')}/node-{node.host}"
            place = {
                "nnodes": len(self.nodes),
                "node_rank": k,
                "master_addr": master,
                "master_port": port,
                "rdzv_id": job.batch_id,
                "local_addr": info.addr,
                "join_timeout_s": self.join_timeout_s,
                "pg_timeout_s": self.pg_timeout_s,
            }
            if self.ifname:
                place["ifname"] = self.ifname
            jobs.append(dataclasses.replace(job, nodes=place, nproc=job.nproc or 1))
        return jobs

    # -- the run ---------------------------------------------------------------------
    def run(
        self,
        job: Job,
        on_event: EventSink,
        cancel: threading.Event | None = None,
        timeout: float | None = None,
    ) -> dict:
        emit_lock = threading.Lock()
        started = time.monotonic()

        def emit(event: dict) -> None:
            with emit_lock:
                on_event(event)

        emit({"event": "stage", "stage": "connect", "message": f"reaching {', '.join(self.hosts)}"})
        self.probe()
        emit(
            {
                "event": "stage",
                "stage": "connect",
                "message": "; ".join(
                    f"{i.host}: {i.name} {i.addr}, clock "
                    f"{i.offset_s * 1000:+.1f} ± {i.uncertainty_s * 1000:.1f} ms"
                    for i in self.info
                ),
            }
        )
        jobs = self.node_jobs(job)
        stop = threading.Event()
        results: dict[int, dict] = {}
        failures: list[tuple[float, int, BaseException]] = []
        done = threading.Event()
        waiting: set[int] = set()
        nproc = int(jobs[0].nproc or 1)

        def one(k: int) -> None:
            node = self.nodes[k]

            def sink(event: dict) -> None:
                event = dict(event)
                event.setdefault("node", node.host)
                if event.get("stage") == "collective" and isinstance(event.get("rank"), int):
                    waiting.add(event["rank"])  # the rank's watchdog: it waits for the others
                if event.get("event") == "stage" and "rank" not in event and k:
                    return  # the first node speaks for the job before its ranks start
                emit(event)

            try:
                results[k] = node.run(jobs[k], sink, stop, None if timeout is None else timeout)
            except BaseException as exc:  # noqa: BLE001 (reported by the caller)
                failures.append((time.monotonic(), k, exc))
                if _cause(exc) < PEER or isinstance(exc, (Cancelled, TimedOut)):
                    stop.set()
                else:
                    # A peer that noticed: the cause (a dead node's closed connection) can
                    # come a moment later, and a node told to stop first says only
                    # "cancelled" (a fresh CI run named node1's "Connection closed by
                    # peer" for node2's kill -9). The others get BLAME_GRACE_S to say theirs.
                    hold = threading.Timer(BLAME_GRACE_S, stop.set)
                    hold.daemon = True
                    hold.start()
            finally:
                if len(results) + len(failures) == len(self.nodes):
                    done.set()

        threads = [threading.Thread(target=one, args=(k,), daemon=True) for k in range(len(self.nodes))]
        for t in threads:
            t.start()
        gone = self._watch(done, stop, cancel)
        stop.set()
        for k, t in enumerate(threads):
            # A node that is gone cannot be told to stop (its lifeline ends the
            # run there once its connection closes): the others are waited for.
            if gone is None or k != gone[0]:
                t.join()
        if gone is not None:
            k, silent = gone
            self.unreachable.add(self.hosts[k])  # nothing more is asked of it (remove_runs)
            others = [h for h in self.hosts if h != self.hosts[k]]
            raise TargetError(
                f"{self.hosts[k]}: no answer over SSH for {silent:.0f} s during the run (the node "
                f"died or its network is down); the job was stopped on {', '.join(others) or 'no other node'}"
            )
        if cancel is not None and cancel.is_set():
            raise Cancelled("cancelled")
        if failures:
            raise self._blame(failures, timeout, started, self._hung(waiting, nproc))
        t0 = time.perf_counter()
        document = self.combine([results[k] for k in range(len(self.nodes))])
        self.timings["combine_s"] = time.perf_counter() - t0
        return document

    def _watch(
        self, done: threading.Event, stop: threading.Event, cancel: threading.Event | None
    ) -> tuple[int, float] | None:
        """Until the nodes are done: a node silent for ``node_timeout_s`` → (its index,
        seconds silent). A cancel stops them all."""
        last = [time.monotonic()] * len(self.nodes)
        busy = [False] * len(self.nodes)

        def ask(k: int) -> None:
            try:
                self.nodes[k].conn.run("true", timeout=max(self.node_timeout_s, 1.0))
                last[k] = time.monotonic()
            except LensError:
                pass
            finally:
                busy[k] = False

        while not done.wait(0.2):
            if cancel is not None and cancel.is_set():
                stop.set()
            if stop.is_set():
                done.wait(30)  # the nodes stop their remote groups
                return None
            now = time.monotonic()
            for k in range(len(self.nodes)):
                if now - last[k] > self.node_timeout_s:
                    stop.set()
                    return k, now - last[k]
                if not busy[k] and now - last[k] >= WATCH_EVERY_S:
                    busy[k] = True
                    threading.Thread(target=ask, args=(k,), daemon=True).start()
        return None

    def _hung(self, waiting: set[int], nproc: int) -> str:
        """The ranks that never reached the collective the others waited in."""
        if not waiting:
            return ""
        world = range(len(self.nodes) * nproc)
        hung = [r for r in world if r not in waiting]
        if not hung:
            return ""
        names = ", ".join(f"{self.hosts[r // nproc]} / rank {r}" for r in hung)
        return f"{names} did not reach the collective the other ranks waited in"

    def _blame(
        self,
        failures: list[tuple[float, int, BaseException]],
        timeout: float | None,
        started: float,
        hung: str = "",
    ) -> LensError:
        """One error for the job: the node whose failure caused the others'."""
        failures.sort(key=lambda f: f[0])
        for _t, _k, exc in failures:
            if isinstance(exc, TimedOut):
                text = f"timed out after {timeout:g} s" if timeout else str(exc)
                return TimedOut(f"{text}: {hung}" if hung else text)
        causes = [f for f in failures if not isinstance(f[2], Cancelled)]
        if not causes:
            return Cancelled("cancelled")

        def rank(f: tuple[float, int, BaseException]) -> tuple[int, float]:
            return (_cause(f[2]), f[0])

        _t, k, exc = min(causes, key=rank)
        host = self.hosts[k]
        text = str(exc)
        if not text.startswith(host):
            text = f"{host}: {text}"
        if hung and _cause(exc) == PEER:  # peers timed out waiting for a hung rank
            text = f"{hung}; {text}"
        if isinstance(exc, HarnessError):
            return HarnessError(exc.kind, text, exc.file, exc.line)
        if isinstance(exc, LensError):
            return type(exc)(text)
        return TargetError(text)

    def combine(self, documents: list[dict]) -> dict:
        """Every host's launcher document → one with every rank's batch."""
        rank_batches: list[dict] = []
        clocks = {i.host: i for i in getattr(self, "info", [])}
        for node, document in zip(self.nodes, documents, strict=True):
            clock = clocks.get(node.host)
            for rb in document.get("rank_batches") or []:
                if clock is not None and math.isfinite(clock.offset_s):
                    # the node's clock against ours when the run began: the ranks'
                    # timelines are each on their node's clock (docs/nodes.md)
                    rb["clock_offset_ms"] = round(clock.offset_s * 1000, 3)
                    rb["clock_uncertainty_ms"] = round(clock.uncertainty_s * 1000, 3)
                for result in (rb.get("batch") or {}).get("results") or []:
                    if isinstance(result, dict):
                        result["host"] = node.host
                        if isinstance(result.get("artifacts"), dict):
                            result["artifacts"]["location"] = node.host
                rank_batches.append(rb)
        if not rank_batches:
            raise TargetError(f"{self.hosts[0]}: the job's nodes returned no ranks")
        rank_batches.sort(key=lambda rb: int(rb.get("rank", 0)))
        first = documents[0]
        return {**first, "world_size": len(rank_batches), "rank_batches": rank_batches}

    # -- afterwards ----------------------------------------------------------------------
    def fetch(self, remote_path: str, dest: Path, *, workspace: Path) -> Path:
        last: LensError | None = None
        for node in self.nodes:
            try:
                return node.fetch(remote_path, dest, workspace=workspace)
            except LensError as exc:
                last = exc
        raise last or TargetError("no host to fetch from")

    def remove_runs(self, workspace: Path, batch_ids: list[str]) -> None:
        # A node that stopped answering would hold this up until its TCP timeout: its
        # folder is left (the next run's pruning there removes it once it answers).
        for host, node in zip(self.hosts, self.nodes, strict=True):
            if host not in self.unreachable:
                node.remove_runs(workspace, batch_ids)

    def close(self) -> None:
        for node in self.nodes:
            node.close()

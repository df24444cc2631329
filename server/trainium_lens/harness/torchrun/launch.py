"""Launch a ``--nproc N`` job: the harness process the target started becomes
the launcher of N ranks under ``torchrun`` and speaks for them.

Targets start ``python -m trainium_lens.harness`` the same way for one rank or
many (locally, or through ``targets/ssh/wrapper.py`` on a host), so the process-group
kill of a cancel or a timeout, the host lock and the heartbeat all work
unchanged. When the job asks for N > 1 ranks (``--nproc``, the marker option
``nproc=``), this process:

1. checks N against what the host has (``nproc_limit``: its CPU cores, its GPUs
   for CUDA): a rank per core at most, or one clear ``spec`` error;
2. writes the spec to ``<run_dir>/spec.json`` (every rank reads it there:
   stdin is one stream) and runs torchrun's agent (``agent.py``: ``<this python>
   -m trainium_lens.harness.torchrun.agent``, torch.distributed.run with a
   loopback-only rendezvous, dying with this process) in this process group (no
   PATH lookup; the target's interpreter is the one running this);
3. passes the ranks' events on (each carries ``rank``; the core shows rank 0's
   progress); the first ``error`` of any rank ends the job (torchrun is told to
   stop the others: SIGTERM, then SIGKILL). The agent is watched, not only its
   output: an agent that dies (killed, out of memory) is reported at once, even
   if something still held its stdout;
4. once every rank has reported its ``result`` (``<run_dir>/rank<k>/batch.json``),
   writes ``<run_dir>/batch.json``: rank 0's results plus ``rank_batches`` (every
   rank's batch as written), which the core merges (``trainium_lens.model.ranks``),
   and reports that as the job's ``result``.

torchrun puts each worker in a session of its own; the ranks ask the kernel to
kill them when the torchrun agent dies (``rank.tie_to_agent``), so stopping
this process group (agent included) stops every rank; this process itself dies
with its starter (``harness/runtime/lifeline.py``) and takes the group with it.

Stdlib only: no torch in this process.
"""

from __future__ import annotations

import collections
import glob
import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from typing import Any

from trainium_lens.harness.events import HarnessError, write_json_atomic
from trainium_lens.harness.nodes.launch import node_launch, node_name
from trainium_lens.harness.torchrun.agent import LAUNCHER_PID_ENV, torchrun_args
from trainium_lens.harness.torchrun.rank import SPEC_FILE_ENV

#: Seconds torchrun gets to stop its workers after SIGTERM before SIGKILL.
STOP_GRACE_S = 5.0
#: Seconds to look for a dead peer behind a rank's connection error.
PEER_GRACE_S = 2.0
#: Seconds the ranks' last lines may take to arrive once the agent has exited.
AGENT_GRACE_S = 2.0
_EOF = object()
_PEER_ERROR = re.compile(r"connection|peer|gloo|nccl|socket|timed out|broken pipe", re.IGNORECASE)


def torchrun_argv(python: str, nproc: int, run_dir: str, nodes: dict | None = None) -> list[str]:
    log_dir = os.path.join(run_dir, "torchrun")
    if nodes is None:
        args = torchrun_args(nproc, log_dir)
    else:  # one node of a job across nodes (harness/nodes/launch.py)
        args = [*node_launch(nodes, nproc, log_dir)[0], "-m", "trainium_lens.harness"]
    return [python, "-m", "trainium_lens.harness.torchrun.agent", *args]


def expected_ranks(nproc: int, nodes: dict | None) -> list[int]:
    """The global ranks this node's agent starts: torchrun numbers them by node
    rank (every node runs ``nproc``)."""
    first = int(nodes.get("node_rank") or 0) * nproc if nodes else 0
    return list(range(first, first + nproc))


def nproc_limit(backend: str) -> tuple[int, str]:
    """The most ranks this host takes, and what bounds it: its usable CPU cores
    (every rank is a process of its own), and for CUDA its GPUs (a rank each).
    NeuronCores are not counted here (no stdlib way to read them); the Neuron
    runtime refuses a rank without a core."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    limit, what = cores, f"{cores} CPU core{'s' if cores != 1 else ''}"
    gpus = len(glob.glob("/proc/driver/nvidia/gpus/*"))
    neuron = bool(glob.glob("/dev/neuron*"))
    if gpus and (backend == "cuda" or (backend == "auto" and not neuron)) and gpus < limit:
        limit, what = gpus, f"{gpus} GPU{'s' if gpus != 1 else ''}"
    return limit, what


def check_nproc(nproc: int, backend: str) -> None:
    limit, what = nproc_limit(backend)
    if nproc > limit:
        raise HarnessError(
            "spec",
            f"nproc={nproc} is more ranks than this host can run: it has {what} (a rank "
            f"each): use nproc={limit} or fewer",
        )


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    proc.terminate()  # torchrun's agent SIGTERMs its workers, then SIGKILLs them
    try:
        proc.wait(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        proc.kill()  # the ranks die with it (PR_SET_PDEATHSIG)
        proc.wait()


def run(spec: Any, events: Any, spec_text: str, nproc: int) -> int:
    """Launch the ranks, relay their events, gather their batches. Exit status as
    the harness's: 0 after ``result``, 1 after ``error``."""
    check_nproc(nproc, spec.backend)
    run_dir = spec.run_dir
    os.makedirs(run_dir, exist_ok=True)
    spec_path = os.path.join(run_dir, "spec.json")
    with open(spec_path, "w", encoding="utf-8") as handle:
        handle.write(spec_text)
    env = dict(os.environ)
    env[SPEC_FILE_ENV] = os.path.abspath(spec_path)
    env[LAUNCHER_PID_ENV] = str(os.getpid())  # the agent checks its parent against it
    env["PYTHONUNBUFFERED"] = "1"
    nodes = spec.nodes
    expected = expected_ranks(nproc, nodes)
    where = ""
    if nodes is not None:
        env.update(node_launch(nodes, nproc, os.path.join(run_dir, "torchrun"), spec.backend)[1])
        where = f" on {node_name(nodes)} (node {int(nodes.get('node_rank') or 0)} of {nodes['nnodes']})"
    events.stage("launch", None, f"starting {nproc} ranks under torchrun{where}")
    try:
        proc = subprocess.Popen(
            torchrun_argv(sys.executable, nproc, run_dir, nodes),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
    except OSError as exc:
        raise HarnessError("backend_unavailable", f"cannot start torchrun: {exc}") from None
    tail: collections.deque[str] = collections.deque(maxlen=40)
    relay = threading.Thread(target=_relay_stderr, args=(proc, tail), daemon=True)
    relay.start()
    results: dict[int, str] = {}
    pids: dict[int, int] = {}
    assert proc.stdout is not None
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=_pump, args=(proc.stdout, lines), daemon=True).start()
    try:
        for raw in _until_agent_ends(proc, lines):
            event = _parse(raw)
            if event is None:
                text = raw.decode("utf-8", "replace").rstrip("\r\n")
                if text:
                    events.emit("output", text=text)
                continue
            kind = event.pop("event")
            if isinstance(event.get("rank"), int) and isinstance(event.get("pid"), int):
                pids[event["rank"]] = event.pop("pid")
            if kind == "result" and isinstance(event.get("rank"), int):
                results[event["rank"]] = str(event.get("path"))
                if len(results) == nproc:
                    path = _gather(spec, results, nproc)
                    events.stage("done", None, f"{nproc} ranks profiled")
                    events.emit("result", path=path)
                    return 0
                continue
            if kind == "error":
                event = _blame_the_dead(event, pids)
            events.emit(kind, **event)
            if kind == "error":
                return 1
        code = proc.wait()
        relay.join(timeout=2)
        missing = [str(k) for k in expected if k not in results]
        if code < 0:  # the agent itself was killed: its ranks died with it
            raise HarnessError(
                "internal",
                f"torchrun's agent was killed by {_signal_name(-code)} before rank(s) "
                f"{', '.join(missing)} reported a result (out of memory, or stopped from "
                f"outside); its ranks were stopped with it",
            )
        root = _root_cause(list(tail))
        if root is not None:  # a rank died without a word and the agent stopped the rest
            rank, status = root
            raise HarnessError(
                "user_code",
                f"rank {rank} exited during the run without an error (exit status "
                f"{status}: killed, out of memory, or a crash); torchrun stopped rank(s) "
                f"{', '.join(k for k in missing if k != str(rank)) or '-'}",
            )
        last = next((ln for ln in reversed(tail) if ln.strip()), "")
        raise HarnessError(
            "internal",
            f"torchrun ended (exit status {code}) before rank(s) {', '.join(missing)} "
            f"reported a result" + (f": {last.strip()[:300]}" if last else ""),
        )
    finally:
        _stop(proc)


def _pump(stream: Any, lines: queue.Queue) -> None:
    try:
        for raw in iter(stream.readline, b""):
            lines.put(raw)
    except (OSError, ValueError):
        pass
    lines.put(_EOF)


def _until_agent_ends(proc: subprocess.Popen, lines: queue.Queue):
    """The ranks' output lines until the pipe closes, or until ``AGENT_GRACE_S``
    after the agent exited: a process that outlived it and still holds the pipe
    (it should not: the ranks die with the agent) cannot keep the run waiting."""
    ended: float | None = None
    while True:
        if ended is None and proc.poll() is not None:
            ended = time.monotonic()
        if ended is not None and time.monotonic() - ended > AGENT_GRACE_S:
            return
        try:
            raw = lines.get(timeout=0.1)
        except queue.Empty:
            continue
        if raw is _EOF:
            return
        yield raw


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return not sys.platform.startswith("linux")  # /proc unreadable on Linux: gone


def _blame_the_dead(event: dict, pids: dict[int, int]) -> dict:
    """A rank's error right after another rank died without a word (a crash, the
    OOM killer, ``os._exit``) is the peer's connection dropping: name the dead
    rank first, so the one line says where to look."""
    me = event.get("rank")
    mine = pids.get(me) if isinstance(me, int) else None
    # A peer's socket closes as it exits, a moment before it is gone from the
    # process table: for an error that reads like a dropped peer, look a while.
    peerish = _PEER_ERROR.search(str(event.get("message", ""))) is not None
    deadline = time.monotonic() + (PEER_GRACE_S if peerish else 0.0)
    while True:
        dead = sorted(r for r, pid in pids.items() if r != me and not _alive(pid))
        # Read after the others: a rank still alive now was alive when they were found
        # dead, so they died first. Once it has ended, torchrun's agent stops the rest,
        # and a rank found dead may be one it stopped, no cause (seen on a two-node run:
        # a node killed, rank 1's "connection closed", and rank 0, stopped after it,
        # named as the rank that died).
        if mine is not None and not _alive(mine):
            dead = []
            break
        if dead or time.monotonic() >= deadline:
            break
        time.sleep(0.05)
    if not dead:
        return event
    which = ", ".join(str(r) for r in dead)
    return {
        **event,
        "message": f"rank {which} exited during the run without an error "
        f"(killed, out of memory, or a crash); then {event.get('message')}",
    }


_ROOT_RANK = re.compile(r"^\s*rank\s*:\s*(\d+)")
_ROOT_EXIT = re.compile(r"^\s*exitcode\s*:\s*(-?\d+)")


def _root_cause(lines: list[str]) -> tuple[int, int] | None:
    """The rank and exit status of torchrun's "Root Cause (first observed failure)"
    report, when a rank died before any rank said why (the agent, not a peer's
    error, noticed it first)."""
    try:
        start = next(i for i, ln in enumerate(lines) if "Root Cause" in ln)
    except StopIteration:
        return None
    rank = status = None
    for ln in lines[start:]:
        m = _ROOT_RANK.match(ln)
        if m and rank is None:
            rank = int(m.group(1))
        m = _ROOT_EXIT.match(ln)
        if m and status is None:
            status = int(m.group(1))
    return (rank, status) if rank is not None and status is not None else None


def _relay_stderr(proc: subprocess.Popen, tail: collections.deque) -> None:
    """torchrun's and the ranks' stderr: on to ours (the target keeps its tail)."""
    assert proc.stderr is not None
    for raw in iter(proc.stderr.readline, b""):
        text = raw.decode("utf-8", "replace")
        tail.append(text)
        try:
            sys.stderr.write(text)
            sys.stderr.flush()
        except (OSError, ValueError):
            pass


def _parse(raw: bytes) -> dict | None:
    text = raw.decode("utf-8", "replace").strip()
    if not text.startswith("{"):
        return None
    try:
        obj = json.loads(text)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) and isinstance(obj.get("event"), str) else None


def _gather(spec: Any, paths: dict[int, str], nproc: int) -> str:
    """``<run_dir>/batch.json``: rank 0's results, and every rank's batch for the core."""
    rank_batches = []
    nodes = spec.nodes
    for rank in sorted(paths):
        path = paths[rank]
        try:
            with open(path, encoding="utf-8") as handle:
                batch = json.load(handle)
        except (OSError, ValueError) as exc:
            raise HarnessError("internal", f"rank {rank}: cannot read its batch {path}: {exc}") from None
        entry = {"rank": rank, "run_dir": os.path.dirname(os.path.abspath(path)), "batch": batch}
        if nodes is not None:  # which node ran it, and as which of its ranks
            node_rank = int(nodes.get("node_rank") or 0)
            entry.update(node=node_name(nodes), node_rank=node_rank, local_rank=rank - node_rank * nproc)
        rank_batches.append(entry)
    document = {
        "schema_version": rank_batches[0]["batch"].get("schema_version", 1),
        "batch_id": spec.batch_id,
        "world_size": nproc * (int(nodes["nnodes"]) if nodes else 1),
        "results": rank_batches[0]["batch"].get("results", []),
        "rank_batches": rank_batches,
    }
    out = os.path.join(spec.run_dir, "batch.json")
    write_json_atomic(out, document)
    return os.path.abspath(out)

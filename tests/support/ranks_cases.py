"""Workspaces and process checks shared by the torchrun (``--nproc``) tests."""

from __future__ import annotations

import os
import textwrap
import threading
import time
from pathlib import Path

# Rank 1 multiplies an 8x taller matrix: eight times rank 0's work on the matmul
# line; both then meet in all_reduce, where rank 0 (early) waits. Eight, on one
# thread each: ranks share a loaded 2-core machine, and an op's time read while
# its rank is descheduled grows; at 3x contended ranks have read within 8%.
UNEVEN = textwrap.dedent("""
    import os
    import torch
    import torch.distributed as dist


    def make(rank, world_size):
        with open(__file__ + f".rank{rank}", "w") as f:
            f.write(str(os.getpid()))
        torch.set_num_threads(1)
        n = 384
        return torch.randn(n * (8 if rank == 1 else 1), n), torch.randn(n, n)


    # trainium: profile inputs=make nproc=2 wait=0 warmup=1 active=5 timing_calls=3
    def step(a, w):
        y = a @ w
        s = y.sum(0)
        dist.all_reduce(s)
        return s
""")

# Rank 1 raises on its line; rank 0 is left waiting in all_reduce.
RAISES = textwrap.dedent("""
    import torch
    import torch.distributed as dist


    def make(rank):
        return (torch.ones(4) * rank,)


    # trainium: profile inputs=make nproc=2 wait=0 warmup=0 active=1 timing_calls=1
    def step(x):
        if x[0].item() == 1:
            raise ValueError("rank one fails")
        dist.all_reduce(x)
        return x
""")

# Rank 1 dies without a word (as the OOM killer would leave it); rank 0's
# all_reduce then fails on the dropped connection.
DIES = textwrap.dedent("""
    import os
    import torch
    import torch.distributed as dist


    def make(rank):
        return (torch.ones(4) * rank,)


    # trainium: profile inputs=make nproc=2 wait=0 warmup=0 active=1 timing_calls=1
    def step(x):
        if x[0].item() == 1:
            os._exit(7)
        dist.all_reduce(x)
        return x
""")

# Rank 1 sleeps (a rank that never reaches the collective); rank 0 waits in it.
HANGS = textwrap.dedent("""
    import os
    import time
    import torch
    import torch.distributed as dist


    def make(rank):
        with open(__file__ + f".rank{rank}", "w") as f:
            f.write(str(os.getpid()))
        return (torch.ones(4) * rank,)


    # trainium: profile inputs=make nproc=2 wait=0 warmup=0 active=1 timing_calls=1
    def step(x):
        if x[0].item() == 1:
            time.sleep(300)
        dist.all_reduce(x)
        return x
""")


def line_of(source: str, text: str) -> int:
    """1-based line of the first line containing ``text``."""
    for number, line in enumerate(source.splitlines(), 1):
        if text in line:
            return number
    raise AssertionError(f"{text!r} not in the source")


def alive(pid: int) -> bool:
    """Running (a zombie waiting for an init that does not reap counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def job_processes(marker: str) -> list[int]:
    """Processes whose environment names ``marker`` (a run folder): the torchrun
    agent and every rank of that run carry ``TRAINIUM_LENS_SPEC_FILE=<run>/spec.json``."""
    found = []
    needle = marker.encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                env = handle.read()
        except OSError:
            continue
        if needle in env and alive(int(entry)):
            found.append(int(entry))
    return found


def wait_gone(marker: str, seconds: float = 20.0) -> list[int]:
    """Wait until no process of the run is left; returns those still there."""
    deadline = time.monotonic() + seconds
    left = job_processes(marker)
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = job_processes(marker)
    return left


def wait_for_files(paths: list[Path], seconds: float = 90.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if all(p.exists() and p.read_text() for p in paths):
            return
        time.sleep(0.05)
    raise AssertionError(f"never appeared: {[str(p) for p in paths if not p.exists()]}")


def cancel_when_running(pid_files: list[Path], marker: str) -> tuple[threading.Event, list[int]]:
    """A cancel event that a thread sets once every rank has written its pid file
    (HANGS does), and the processes of the run (``marker``) it saw just before."""
    cancel = threading.Event()
    seen: list[int] = []

    def watch() -> None:
        wait_for_files(pid_files)
        seen.extend(job_processes(marker))
        cancel.set()

    threading.Thread(target=watch, daemon=True).start()
    return cancel, seen

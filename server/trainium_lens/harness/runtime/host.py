"""What the host did to this process while it was measured (stdlib only).

A profiled step that had to wait for a CPU is longer than the code's cost, and
nothing in the profiler's trace says so. Three observations tell it apart
(docs/protocol.md, "Schema 3": stability):

* **run-queue delay** of every thread of this process (``/proc/self/task/*/
  schedstat``, second field: nanoseconds spent runnable but not running). It
  catches what context-switch counts miss: an OpenMP worker woken for a
  parallel region that then waits for a core holds the calling thread at the
  region's barrier, and neither thread is *switched out* while it waits;
* **involuntary context switches** of the process (``getrusage``);
* **CPU time of other processes**: the machine's busy time (``/proc/stat``)
  minus this process's own and its job's (sibling ranks, launcher:
  ``outside.py``), over a window, in cores; beside it the job's own, the
  outside processes that used the most, pressure stall and steal time.

Each is ``None`` where the host does not provide it (not Linux, no schedstat);
the judgement then rests on what is left.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

from trainium_lens.harness.runtime.outside import Outside

try:
    import resource
except ImportError:  # pragma: no cover - not on Linux/macOS
    resource = None  # type: ignore[assignment]

_TASKS = "/proc/self/task"


class RunQueueDelay:
    """Summed run-queue delay of this process's threads (µs), read cheaply: one
    open descriptor per thread, re-read with ``pread`` (about 10 µs a thread)."""

    def __init__(self) -> None:
        self._fds: dict[str, int] = {}
        self.available = os.path.isdir(_TASKS)
        self.refresh()

    def refresh(self) -> None:
        """Pick up threads started since (the OpenMP pool starts with the first op)."""
        if not self.available:
            return
        try:
            tids = set(os.listdir(_TASKS))
        except OSError:
            self.available = False
            return
        for tid in list(self._fds):
            if tid not in tids:
                self._drop(tid)
        for tid in tids - set(self._fds):
            try:
                self._fds[tid] = os.open(f"{_TASKS}/{tid}/schedstat", os.O_RDONLY)
            except OSError:
                continue
        if not self._fds:
            self.available = False

    def read_us(self) -> float | None:
        if not self.available:
            return None
        total = 0
        for tid, fd in list(self._fds.items()):
            try:
                total += int(os.pread(fd, 128, 0).split()[1])
            except (OSError, IndexError, ValueError):
                self._drop(tid)  # the thread ended: its delay so far is lost, later deltas stay right
        return total / 1000.0

    def _drop(self, tid: str) -> None:
        fd = self._fds.pop(tid, None)
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass

    def close(self) -> None:
        for tid in list(self._fds):
            self._drop(tid)


def involuntary_switches() -> int | None:
    """Involuntary context switches of this process so far (all threads)."""
    if resource is None:
        return None
    try:
        return int(resource.getrusage(resource.RUSAGE_SELF).ru_nivcsw)
    except (OSError, ValueError):
        return None


def _machine_busy_s() -> float | None:
    """CPU seconds the whole machine spent busy since boot (all CPUs)."""
    try:
        with open("/proc/stat", encoding="ascii") as fh:
            fields = fh.readline().split()
        ticks = os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError):
        return None
    if not fields or fields[0] != "cpu" or len(fields) < 8:
        return None
    # user nice system idle iowait irq softirq steal (guest is inside user)
    busy = sum(int(v) for i, v in enumerate(fields[1:9]) if i not in (3, 4))
    return busy / ticks


def _own_cpu_s() -> float:
    t = os.times()
    return t.user + t.system


@dataclass
class HostWindow:
    """Observations between ``start()`` and ``stop()`` (one function's run)."""

    t0: float = 0.0
    cpu0: float = 0.0
    busy0: float | None = None
    switches0: int | None = None
    outside: Outside = field(default_factory=Outside)

    MIN_WINDOW_S = 0.25  # /proc/stat counts in ticks (10 ms): shorter windows say nothing

    def start(self) -> HostWindow:
        self.t0, self.cpu0 = time.perf_counter(), _own_cpu_s()
        self.busy0, self.switches0 = _machine_busy_s(), involuntary_switches()
        self.outside.start()
        return self

    def stop(self) -> dict:
        wall = time.perf_counter() - self.t0
        own = _own_cpu_s() - self.cpu0
        busy1, switches1 = _machine_busy_s(), involuntary_switches()
        seen = self.outside.stop(wall)
        job_s = seen.pop("job_s")
        others = job = None
        if self.busy0 is not None and busy1 is not None and wall >= self.MIN_WINDOW_S:
            # the job's processes are counted in the machine's busy time too: not outside
            job = round(min(job_s, max(0.0, busy1 - self.busy0 - own)) / wall, 3)
            others = round(max(0.0, (busy1 - self.busy0) - own - job_s) / wall, 3)
        else:
            seen = {k: v for k, v in seen.items() if k in ("cpus", "job_processes")}
        switches = None
        if self.switches0 is not None and switches1 is not None:
            switches = switches1 - self.switches0
        return {
            "window_s": round(wall, 3),
            "others_cores": others,
            "job_cores": job,
            "involuntary_switches": switches,
            **seen,
        }


def load_cores(stopped: dict) -> float | None:
    """Every other process's CPU in a stopped window, the job's own included: what a
    measurement of the host itself (its roof, the profiler's cost) shares the cores with."""
    others = stopped.get("others_cores")
    return None if others is None else round(others + (stopped.get("job_cores") or 0.0), 3)

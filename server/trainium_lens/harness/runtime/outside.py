"""Who else used the host during a measured window: this job's own processes told
apart from outside load, and the kernel's own word on contention (stdlib only).

``/proc/stat``'s busy time minus this process's own CPU time is everything else
the machine did. Part of it is the job itself: the sibling ranks of torchrun (or
of ``accelerate launch``, or of one SLURM step on this node), the launcher and
the tool's own processes. They contend for the cores as outside load does, but
they are the job's own shape, not noise (docs/accuracy.md, "Noise"). A process
belongs to the job when

* its environment carries the same job marker as this process's (``MARKERS``:
  the tool's run spec, its ranks' spec file, SLURM's job and step, torchrun's
  run id with its master address and port; the environment as the process was
  started, ``/proc/<pid>/environ``: the harness pops its own marker later), or
* it is an ancestor of this process up to the first one without the marker (the
  agent, the owner, and the launcher that started them: the CLI, the harness), or
* it descends from one that carries the marker or from this process (a sibling
  rank's DataLoader workers, our own).

What the others used is the rest, and so also holds what no process list shows:
kernel threads, processes that ended in the window, processes of other
containers (``/proc/stat`` is the host's where ``/proc/<pid>`` is not). Beside
it, where the kernel has them: pressure stall information (``/proc/pressure/
cpu`` and ``memory``: the share of the window some task waited for a CPU or
stalled on memory) and steal time (``/proc/stat``: the hypervisor ran others on
this VM's CPUs). Each is ``None`` where the host does not provide it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

MARKERS = (
    ("TRAINIUM_LENS_RUN",),  # `run`: every process the command starts (targets/script.py)
    ("TRAINIUM_LENS_SPEC_FILE",),  # `profile --nproc`: each rank (harness/torchrun/rank.py)
    ("SLURM_JOB_ID", "SLURM_STEP_ID"),
    # torchrun's default run id is "none" for every job: the master's address and port tell
    # two jobs on one host apart (no two can hold one port at once)
    ("TORCHELASTIC_RUN_ID", "MASTER_ADDR", "MASTER_PORT"),
)
TOP = 3  # outside processes named


def _environ(pid: int | str) -> dict[str, str] | None:
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            raw = fh.read()
    except OSError:  # another user's process, or gone: not ours to count as the job
        return None
    out = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            out[key.decode("utf-8", "replace")] = value.decode("utf-8", "replace")
    return out


def own_markers(env: dict[str, str] | None = None) -> list[tuple[tuple[str, str], ...]]:
    """The job markers this process was started with (``env``: for the tests)."""
    if env is None:
        env = _environ("self") or dict(os.environ)
    found = []
    for names in MARKERS:
        if all(env.get(n) for n in names):
            found.append(tuple((n, env[n]) for n in names))
    return found


@dataclass
class Proc:
    ppid: int
    ticks: int  # utime + stime
    start: int  # start time since boot (ticks): a reused pid is another process
    comm: str


def _stat(pid: int) -> Proc | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read().decode("utf-8", "replace")
    except OSError:
        return None
    head, _, rest = raw.rpartition(")")
    parts = rest.split()
    if len(parts) < 20:
        return None
    try:
        return Proc(int(parts[1]), int(parts[11]) + int(parts[12]), int(parts[19]), head.partition("(")[2])
    except ValueError:
        return None


def snapshot() -> dict[int, Proc]:
    procs: dict[int, Proc] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return procs
    for name in names:
        if name.isdigit():
            p = _stat(int(name))
            if p is not None:
                procs[int(name)] = p
    return procs


def job_pids(procs: dict[int, Proc], me: int, markers: list, environ=_environ) -> set[int]:
    """The pids of ``procs`` that belong to this process's job (``me`` excluded)."""
    job: set[int] = set()
    if markers:
        for pid in procs:
            env = environ(pid) if pid != me else None
            if env is not None and any(all(env.get(n) == v for n, v in m) for m in markers):
                job.add(pid)
    roots = set(job) | {me}
    marked = set(job)
    up, seen = procs.get(me), {me}
    while up is not None and up.ppid > 1 and up.ppid not in seen:
        seen.add(up.ppid)
        job.add(up.ppid)  # the agent, the owner, the CLI that started them: they wait on us
        if up.ppid not in marked:
            break  # the first ancestor without the marker started the job; above it: the
            # user's shell, an editor's other processes, none of them this job
        up = procs.get(up.ppid)
    children: dict[int, list[int]] = {}
    for pid, p in procs.items():
        children.setdefault(p.ppid, []).append(pid)
    todo = list(roots)
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in job:
                job.add(child)
                todo.append(child)
    job.discard(me)
    return job


def _pressure(resource: str) -> dict[str, int] | None:
    """``{"some": µs, "full": µs}`` stalled since boot (PSI), None without it."""
    try:
        with open(f"/proc/pressure/{resource}", encoding="ascii") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return None
    out = {}
    for line in lines:
        kind, *pairs = line.split()
        for pair in pairs:
            if pair.startswith("total="):
                out[kind] = int(pair[6:])
    return out or None


def _steal_ticks() -> int | None:
    try:
        with open("/proc/stat", encoding="ascii") as fh:
            fields = fh.readline().split()
    except OSError:
        return None
    return int(fields[8]) if len(fields) > 8 and fields[0] == "cpu" else None


def cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


@dataclass
class Outside:
    """One window's job and outside accounting, between ``start()`` and ``stop(wall)``."""

    me: int = field(default_factory=os.getpid)
    markers: list = field(default_factory=own_markers)
    procs0: dict = field(default_factory=dict)
    job0: set = field(default_factory=set)
    cpu0: dict | None = None
    mem0: dict | None = None
    steal0: int | None = None

    envs: dict = field(default_factory=dict)  # pid → environ read at start: read once

    def _environ(self, pid: int) -> dict[str, str] | None:
        if pid not in self.envs:
            self.envs[pid] = _environ(pid)
        return self.envs[pid]

    def start(self) -> Outside:
        self.procs0 = snapshot()
        self.job0 = job_pids(self.procs0, self.me, self.markers, self._environ)
        self.cpu0, self.mem0, self.steal0 = _pressure("cpu"), _pressure("memory"), _steal_ticks()
        return self

    def stop(self, wall_s: float) -> dict:
        """``job_s``: CPU seconds of the job's other processes; the rest as shares."""
        procs = snapshot()
        for pid, p in procs.items():  # a pid reused since start is another process
            if pid in self.procs0 and self.procs0[pid].start != p.start:
                self.envs.pop(pid, None)
        job = self.job0 | job_pids(procs, self.me, self.markers, self._environ)
        tick = os.sysconf("SC_CLK_TCK")
        used: dict[int, float] = {}
        for pid, p in procs.items():
            before = self.procs0.get(pid)
            if before is not None and before.start == p.start:
                used[pid] = (p.ticks - before.ticks) / tick
            elif before is None:  # started in the window (or just before: a tick or two)
                used[pid] = p.ticks / tick
        job_s = sum(s for pid, s in used.items() if pid in job)
        others = sorted(
            ((s, pid) for pid, s in used.items() if pid not in job and pid != self.me and s > 0),
            reverse=True,
        )
        out: dict = {
            "job_s": job_s,
            "job_processes": len([pid for pid in job if pid in procs]),
            "cpus": cpus(),
            "outside_top": [
                f"{procs[pid].comm} (pid {pid}) {s / wall_s:.2f} cores"
                for s, pid in others[:TOP]
                if wall_s > 0
            ],
        }
        cpu1, mem1, steal1 = _pressure("cpu"), _pressure("memory"), _steal_ticks()
        us = wall_s * 1e6
        for name, a, b in (("cpu", self.cpu0, cpu1), ("memory", self.mem0, mem1)):
            for kind in ("some", "full"):
                if a and b and kind in a and kind in b and us > 0:
                    out[f"{name}_pressure_{kind}"] = round(max(0, b[kind] - a[kind]) / us, 4)
        if self.steal0 is not None and steal1 is not None and wall_s > 0:
            out["steal_cores"] = round(max(0, steal1 - self.steal0) / tick / wall_s, 3)
        return out

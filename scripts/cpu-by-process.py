#!/usr/bin/env python3
"""Run COMMAND and say where the machine's CPU went while it ran, by test file.

    python3 scripts/cpu-by-process.py [--json OUT] -- CI=true bash .ci/run

Every process on the machine is sampled from /proc twice a second; each one's CPU
(user + system) is counted to the test file in its PYTEST_CURRENT_TEST (what pytest
set when the test started it, inherited by the harness runs, the CLI, torchrun's ranks
and srun's tasks), else to its command name (``~chromium``, ``~uv``, the pytest
workers' own ``~python``, processes an sshd started). ``tests.support.cpu_time`` counts
only a worker and the children it reaped; this counts everything, the set-up and the
daemons included. A process that ends between two samples loses its last half second.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import time

TICK = os.sysconf("SC_CLK_TCK")


def identity(pid: str) -> tuple[str, str] | None:
    """(what its CPU is counted to, its command line) or None once it is gone."""
    try:
        argv = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
        env = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
        comm = open(f"/proc/{pid}/comm").read().strip()
    except OSError:
        return None
    command = " ".join(a.decode(errors="replace") for a in argv if a)[:100]
    for var in env:
        if var.startswith(b"PYTEST_CURRENT_TEST="):
            return var.split(b"=", 1)[1].decode(errors="replace").split("::")[0], command
    return "~" + comm, command


def sample(seen: dict, by_key: collections.Counter, by_command: dict, count: bool = True) -> None:
    """One sweep of /proc; ``count=False``: what ran before COMMAND is its baseline."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            stat = open(f"/proc/{pid}/stat").read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        ticks, started = int(fields[11]) + int(fields[12]), fields[19]
        known = seen.get(pid)
        if known is None or known[0] != started:  # new, or the pid was reused
            ident = identity(pid)
            if ident is None:
                continue
            known = (started, 0, *ident)
        delta = ticks - known[1]
        if delta and count:
            by_key[known[2]] += delta
            by_command[known[2]][known[3]] += delta
        seen[pid] = (started, ticks, known[2], known[3])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write every key's CPU and its top commands here")
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command")
    seen: dict = {}
    by_key: collections.Counter = collections.Counter()
    by_command: dict = collections.defaultdict(collections.Counter)
    sample(seen, by_key, by_command, count=False)
    t0 = time.monotonic()
    proc = subprocess.Popen(command)
    while proc.poll() is None:
        sample(seen, by_key, by_command)
        time.sleep(0.5)
    wall = time.monotonic() - t0
    total = sum(by_key.values()) / TICK
    print(f"\ncpu-by-process: {total:.0f} s of CPU in {wall:.0f} s ({total / wall:.2f} cores)")
    for key, ticks in by_key.most_common(args.top):
        print(f"  {ticks / TICK:8.1f}  {key}")
    if args.json:
        doc = {
            "wall_s": round(wall, 1),
            "cpu_s": {k: round(v / TICK, 2) for k, v in by_key.most_common()},
            "commands": {k: {c: round(v / TICK, 2) for c, v in by_command[k].most_common(8)} for k in by_key},
        }
        with open(args.json, "w") as out:
            json.dump(doc, out, indent=1)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())

"""CPU time per test, beside pytest's wall durations: ``-p tests.support.cpu_time``.

On this 2-core machine the parallel part is bound by CPU, not by waiting, and a
test's wall time under load says little about what it costs: a run that takes 9 s
alone took 72 s beside the rest. What a test costs the suite is the CPU its worker
and the processes it waited for used (``getrusage`` of the worker and of its reaped
children; a daemon's CPU counts when it is reaped, e.g. a fixture's sshd at its
teardown). With ``TEST_CPU_LOG=FILE`` set, each test's figures are appended to FILE
as a JSON line (every xdist worker appends to the same file);
``python -m tests.support.cpu_time FILE [--top N]`` sums them per file.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from collections import defaultdict
from collections.abc import Generator

import pytest


def _cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(
    item: pytest.Item, nextitem: pytest.Item | None
) -> Generator[None, object, object]:
    path = os.environ.get("TEST_CPU_LOG")
    cpu0, wall0 = _cpu(), time.monotonic()
    result = yield
    if path:
        line = {
            "test": item.nodeid,
            "cpu_s": round(_cpu() - cpu0, 3),
            "wall_s": round(time.monotonic() - wall0, 3),
            # a child another test left running counts where it is reaped: the order
            # per worker tells whose it was
            "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
        }
        with open(path, "a", encoding="utf-8") as f:  # one short write per line: workers never interleave
            f.write(json.dumps(line) + "\n")
    return result


def main(path: str, top: int | None = None) -> None:
    cpu: dict[str, float] = defaultdict(float)
    wall: dict[str, float] = defaultdict(float)
    with open(path, encoding="utf-8") as f:
        for text in f:
            line = json.loads(text)
            file = line["test"].split("::", 1)[0]
            cpu[file] += line["cpu_s"]
            wall[file] += line["wall_s"]
    total = f"total cpu {sum(cpu.values()):.0f} s, wall {sum(wall.values()):.0f} s"
    print(f"{'cpu s':>8} {'wall s':>8}  file   ({total})")
    for file in sorted(cpu, key=cpu.__getitem__, reverse=True)[:top]:
        print(f"{cpu[file]:8.1f} {wall[file]:8.1f}  {file}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[3]) if sys.argv[2:3] == ["--top"] else None)

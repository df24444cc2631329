"""A quiet CPU on a shared machine, and a busy one on demand, for the noise tests.

Linux schedules processes in groups per session (autogroup), and a group's
share of a CPU does not depend on its tasks' nice values, so ``nice -20``
alone does not quiet a machine whose other sessions are busy. The launcher
below starts a new session, gives its group the highest priority (``nice -20``
in ``/proc/self/autogroup``, root only) and pins itself to one CPU; everything
it starts inherits both. Other processes then get about 1% of that CPU (a
5 ms busy loop measured 0–5% run-queue delay on a 2-core machine at load 8).
``spinners`` processes spinning in the same group make it busy: the profiled
process then gets 1/(spinners + 1) of the CPU (66% run-queue delay with two).
Spinners end with the launcher (``PR_SET_PDEATHSIG``) and after two minutes
at the latest, so a killed test cannot leave them behind.
"""

from __future__ import annotations

import os
import subprocess
import sys

LAUNCHER = r"""
import ctypes, os, subprocess, sys
cpu, spinners = int(sys.argv[1]), int(sys.argv[2])
os.setsid()  # a session of its own: an autogroup of its own
os.sched_setaffinity(0, {cpu})
with open("/proc/self/autogroup", "w") as fh:
    fh.write("-20")
SPIN = (
    "import ctypes, time\n"
    "ctypes.CDLL(None).prctl(1, 9)\n"  # PR_SET_PDEATHSIG, SIGKILL: die with the launcher
    "end = time.time() + 120\n"
    "while time.time() < end: pass\n"
)
spin = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(spinners)]
try:
    code = subprocess.run(sys.argv[3:]).returncode
finally:
    for p in spin:
        p.kill()
    for p in spin:
        p.wait()
sys.exit(code)
"""


def available() -> str | None:
    """Why a quiet CPU cannot be made here (None: it can)."""
    if not hasattr(os, "sched_setaffinity") or not os.path.exists("/proc/self/autogroup"):
        return "needs Linux with scheduler autogroups"
    probe = subprocess.run(
        [sys.executable, "-c", "import os; os.setsid(); open('/proc/self/autogroup', 'w').write('-20')"],
        capture_output=True,
    )
    if probe.returncode != 0:
        return "needs permission to raise a session's CPU priority (root)"
    return None


def launcher_args(spinners: int) -> list[str]:
    """``python`` arguments that run the rest of the command line on a quiet CPU
    with ``spinners`` busy processes beside it."""
    cpu = max(os.sched_getaffinity(0))
    return ["-c", LAUNCHER, str(cpu), str(spinners), sys.executable]

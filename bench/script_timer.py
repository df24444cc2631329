"""Run a script as ``python SCRIPT ARGS`` would (``runpy``, ``__main__``) and time
each of its optimizer steps with ``time.perf_counter`` from a post-step hook of
its own: an independent clock for ``script_bench.py`` (it shares no code with the
harness). Writes the step ends (s) to ``$STEP_TIMES`` at exit; with ``$STEP_CPU_TIMES``
also the process's CPU time (every thread's, ``time.process_time``) at each end, which
a loaded host's waiting does not inflate (``after_window_bench.py``). Under torchrun
each rank writes its own file (``.rank<N>`` appended)."""

import atexit
import json
import os
import runpy
import sys
import time

from torch.optim.optimizer import register_optimizer_step_post_hook

ends: list[float] = []
cpu: list[float] = []
first: list[object] = []


def post(optimizer, args, kwargs):
    if not first:
        first.append(optimizer)
    if optimizer is first[0]:
        ends.append(time.perf_counter())
        cpu.append(time.process_time())


def write() -> None:
    rank = f".rank{os.environ['RANK']}" if "RANK" in os.environ else ""
    for var, values in (("STEP_TIMES", ends), ("STEP_CPU_TIMES", cpu)):
        if var in os.environ:
            with open(os.environ[var] + rank, "w") as fh:
                fh.write(json.dumps(values))


register_optimizer_step_post_hook(post)
atexit.register(write)
script = sys.argv[1]
sys.argv = sys.argv[1:]
sys.path[0] = os.path.dirname(os.path.abspath(script))
runpy.run_path(script, run_name="__main__")

"""Run a script as ``python SCRIPT ARGS`` would (``runpy``, ``__main__``) and time
each of its optimizer steps with ``time.perf_counter`` from a post-step hook of
its own: an independent clock for ``script_bench.py`` (it shares no code with the
harness). Writes the step ends (s) to ``$STEP_TIMES`` at exit."""

import atexit
import json
import os
import runpy
import sys
import time

from torch.optim.optimizer import register_optimizer_step_post_hook

ends: list[float] = []
first: list[object] = []


def post(optimizer, args, kwargs):
    if not first:
        first.append(optimizer)
    if optimizer is first[0]:
        ends.append(time.perf_counter())


register_optimizer_step_post_hook(post)
atexit.register(lambda: open(os.environ["STEP_TIMES"], "w").write(json.dumps(ends)))
script = sys.argv[1]
sys.argv = sys.argv[1:]
sys.path[0] = os.path.dirname(os.path.abspath(script))
runpy.run_path(script, run_name="__main__")

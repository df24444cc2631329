"""harness/runtime/lazy_inductor.py: starting torch.profiler imports no inductor (nor dynamo)
in a process that compiled nothing, and changes nothing once inductor is in. Each
case runs in a fresh interpreter: which modules a start imports is per process."""

from __future__ import annotations

import json
import os
import subprocess
import sys

CASE = r"""
import json, sys
import torch
from trainium_lens.harness.runtime.lazy_inductor import keep_inductor_lazy

cls = torch.profiler.profiler._KinetoProfile
wrapped = []
if sys.argv[1] == "guarded":
    for _ in range(2):  # a second call wraps nothing again
        keep_inductor_lazy(torch)
        wrapped.append(cls.prepare_trace)
if sys.argv[2] == "compiled":
    import torch._inductor.config
    torch._inductor.config.triton.cudagraphs = True
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
    torch.ones(8).mul(2).sum()
inductor_after_start = "torch._inductor" in sys.modules
names = {e.name for e in prof.events()}
print(json.dumps({
    "inductor": inductor_after_start,
    "dynamo": "torch._dynamo.convert_frame" in sys.modules,
    "recorded": "aten::mul" in names,
    "cudagraphs_read": prof.has_cudagraphs,
    "lazy_after": hasattr(torch, "_inductor"),
    "wrapped_once": len(set(wrapped)) <= 1,
}))
"""


def run(guard: str, compiled: str = "eager") -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    out = subprocess.run(
        [sys.executable, "-c", CASE, guard, compiled], capture_output=True, text=True, env=env, timeout=300
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_profiler_start_imports_no_inductor_where_nothing_compiled():
    plain, guarded = run("plain"), run("guarded")
    # torch as written: the start's hasattr imports inductor and dynamo with it
    assert plain["inductor"] and plain["dynamo"]
    # guarded: neither, and the profiler still records the ops
    assert not guarded["inductor"] and not guarded["dynamo"]
    assert guarded["recorded"] and plain["recorded"]
    assert guarded["cudagraphs_read"] is False
    assert guarded["wrapped_once"]
    # after the start torch._inductor resolves as usual (imported on demand)
    assert guarded["lazy_after"]


def test_once_inductor_is_in_the_start_reads_its_flag_as_torch_does():
    guarded = run("guarded", "compiled")
    assert guarded["inductor"] and guarded["recorded"]
    assert guarded["cudagraphs_read"] is True

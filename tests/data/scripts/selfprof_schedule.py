"""Profiles itself as the Trainium tutorials do: a ``torch.profiler.profile`` with a
schedule around the loop, stepped once per step, its trace written by
``on_trace_ready``. Waiting ``--wait`` steps first, its profiler records nothing
until then (it is not yet enabled when ``run``'s window would start).
``--start-at K``: the profiler is started at step K (``prof.start()``), not
entered around the loop: inside ``run``'s window for K = 4."""

import argparse
import json
import os

import torch


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=16)
    p.add_argument("--wait", type=int, default=4)
    p.add_argument("--start-at", type=int, default=None)
    p.add_argument("--out", default="own-trace.json")
    args = p.parse_args()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    traces = []

    def ready(prof):
        prof.export_chrome_trace(args.out)
        traces.append(args.out)

    schedule = torch.profiler.schedule(wait=args.wait, warmup=1, active=3, repeat=1)
    prof = torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU], schedule=schedule, on_trace_ready=ready
    )
    start = args.start_at or 0
    for step in range(args.steps):
        if step == start:
            prof.start()
        with torch.profiler.record_function("my_step"):
            opt.zero_grad()
            model(torch.randn(16, 32)).sum().backward()
            opt.step()
        if step >= start:
            prof.step()
    prof.stop()
    with open(args.out) as f:
        steps = sum(1 for e in json.load(f)["traceEvents"] if e.get("name") == "my_step")
    print(f"own trace {os.path.basename(args.out)}: {steps} steps recorded")


if __name__ == "__main__":
    main()

"""Benchmark: could a fixed canary stand for the host's speed? Without trainium-lens.

A figure measured at one moment and an independent timer run at another agree only
if the host ran both at one speed. On a VM whose speed moves (this one: one idle
process read ``rms_norm_naive`` at 23.7-52.2 µs block to block, bench/README.md), a
flag would need something timed beside the function's calls that moves as the
function does: a fixed canary held against its own history on the machine. This
bench asks whether one does, before the tool is given such a flag.

In one fresh process (no trainium-lens imported; the functions loaded as
``independent_wall.py`` loads them), ``--blocks`` blocks ``--pause`` seconds apart;
in each, ``--rounds`` rounds of 10 calls of every function then 10 of every canary,
interleaved, so a function and a canary see the same moments. Per block, each one's
median call. Printed per function and canary, over the blocks:

- ``spread``: the function's slowest block median over its fastest (how far the
  host's speed moved it);
- ``corr``: the correlation of the two log block medians (1: they move together);
- ``worst after``: the largest factor by which the function's block median differs
  from what the canary predicts (the function's median block, scaled by the canary's
  block over its median) — how far a canary-corrected figure could still be off.
  Under 1.15 in every block: the canary could hold a figure to ±15%.

    .venv/bin/python bench/host_speed_bench.py --blocks 16
    .venv/bin/python bench/host_speed_bench.py --blocks 16 --cpus 1   # one CPU, one thread
"""

from __future__ import annotations

import argparse
import inspect
import math
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from independent_wall import call_args, load  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
# (label, workspace, file, function, inputs)
FUNCTIONS = [
    ("rms_norm_naive", ROOT, "examples/rmsnorm.py", "rms_norm_naive", "make_inputs"),
    ("nanogpt forward", ROOT / "tests" / "data" / "nanogpt", "profile_gpt.py", "forward", "make_batch"),
    ("nanogpt train_step", ROOT / "tests" / "data" / "nanogpt", "profile_gpt.py", "train_step", "make_batch"),
]


def canaries() -> dict[str, Callable[[], Any]]:
    """Fixed work of three kinds: torch's dispatcher on a small tensor (one thread,
    under OpenMP's grain), a matmul on torch's intra-op threads, plain Python."""
    a, b = torch.randn(4096), torch.randn(4096)
    m = torch.randn(192, 192)

    def python_loop() -> int:
        s = 0
        for i in range(2000):
            s += i
        return s

    return {
        "dispatch": lambda: (a * b + a).sum(),
        "matmul": lambda: m @ m,
        "python": python_loop,
    }


def function(workspace: Path, file: str, name: str, inputs: str) -> Callable[[], Any]:
    mod = load(workspace, file)
    torch.manual_seed(0)
    make = getattr(mod, inputs)
    made = make(torch.device("cpu")) if "device" in inspect.signature(make).parameters else make()
    args, kwargs = call_args(made)
    fn = getattr(mod, name)
    return lambda: fn(*args, **kwargs)


def ten(fn: Callable[[], Any]) -> list[float]:
    out = []
    for _ in range(10):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1e6)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--blocks", type=int, default=16)
    ap.add_argument("--pause", type=float, default=2.0, help="seconds between blocks")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of 10 calls each per block")
    ap.add_argument("--only", help="only the functions whose label contains this text")
    ap.add_argument("--cpus", help="pin this process to these CPUs (e.g. 1), torch on that many threads")
    args = ap.parse_args()
    if args.cpus:
        cpus = {int(c) for c in args.cpus.split(",")}
        os.sched_setaffinity(0, cpus)
        torch.set_num_threads(len(cpus))
    fns = {
        label: function(ws, file, name, inputs)
        for label, ws, file, name, inputs in FUNCTIONS
        if not args.only or args.only in label
    }
    cans = canaries()
    every = {**fns, **cans}
    for fn in every.values():  # warm: the first calls allocate and pick kernels
        ten(fn)
        ten(fn)
    with open("/proc/loadavg") as fh:
        load_avg = " ".join(fh.read().split()[:3])
    threads = torch.get_num_threads()
    cpus = sorted(os.sched_getaffinity(0))
    print(
        f"{args.blocks} blocks {args.pause} s apart; load average {load_avg}; threads {threads}; CPUs {cpus}"
    )
    blocks: list[dict[str, float]] = []
    for _ in range(args.blocks):
        calls: dict[str, list[float]] = {k: [] for k in every}
        for _ in range(args.rounds):
            for k, fn in every.items():
                calls[k] += ten(fn)
        blocks.append({k: statistics.median(v) for k, v in calls.items()})
        print("  " + "  ".join(f"{k} {v:.1f}" for k, v in blocks[-1].items()), flush=True)
        time.sleep(args.pause)
    mid = {k: statistics.median(b[k] for b in blocks) for k in every}
    print("\n| function | canary | spread | corr | worst after |\n|---|---|---|---|---|")
    for f in fns:
        fl = [math.log(b[f] / mid[f]) for b in blocks]
        for c in cans:
            cl = [math.log(b[c] / mid[c]) for b in blocks]
            corr = (
                statistics.correlation(fl, cl)
                if statistics.pstdev(fl) and statistics.pstdev(cl)
                else math.nan
            )
            worst = math.exp(max(abs(x - y) for x, y in zip(fl, cl, strict=True)))
            spread = math.exp(max(fl) - min(fl))
            print(f"| {f} | {c} | {spread:.2f}x | {corr:.2f} | {worst:.2f}x |")


if __name__ == "__main__":
    main()

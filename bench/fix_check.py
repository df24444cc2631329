"""Independent timing of a fix: the function from two files (before and after the
edit ``trainium-lens fix`` measured), called alternately and timed with
``time.perf_counter`` alone: no harness, no profiler, no variant machinery.

    python bench/fix_check.py BEFORE.py AFTER.py FUNCTION [INPUTS] [--calls N]

Prints each version's median and best call and the speedup (before / after) on
both, to set beside the figure ``fix`` reported (docs/fixes.md).
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time

import torch


def load(path: str, name: str):
    torch.manual_seed(0)  # as the fix measurement does: the same weights in both
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("before")
    p.add_argument("after")
    p.add_argument("function")
    p.add_argument("inputs", nargs="?")
    p.add_argument("--calls", type=int, default=300)
    args = p.parse_args()
    mods = [load(args.before, "check_before"), load(args.after, "check_after")]
    inputs = []
    for m in mods:  # each version its own (the edit may be in the inputs function: an optimizer)
        torch.manual_seed(0)
        inputs.append(getattr(m, args.inputs)() if args.inputs else ())
    fns = [getattr(m, args.function) for m in mods]
    times: list[list[float]] = [[], []]
    for _ in range(5):  # warm up both
        for fn, given in zip(fns, inputs, strict=True):
            fn(*given)
    for _ in range(args.calls):
        for i, fn in enumerate(fns):
            t = time.perf_counter()
            fn(*inputs[i])
            times[i].append(time.perf_counter() - t)
    med = [statistics.median(t) * 1e6 for t in times]
    best = [min(t) * 1e6 for t in times]
    print(f"before: median {med[0]:.1f} µs, best {best[0]:.1f} µs")
    print(f"after:  median {med[1]:.1f} µs, best {best[1]:.1f} µs")
    print(f"speedup: {med[0] / med[1]:.3f}× on medians, {best[0] / best[1]:.3f}× on best calls")


if __name__ == "__main__":
    main()

"""Benchmark: what line attribution costs, and whether it inflates the figures.

    OMP_NUM_THREADS=1 .venv/bin/python bench/overhead_bench.py [--rounds 5]

For each workload, profiled steps with and without the harness's line labels
(``LineLabeler``: a TorchFunctionMode + record_function ranges), alternating
step by step inside one profile; medians over rounds, as ratios (with / without):
* per-op self CPU: mean self CPU time of an ATen op — the figure results report
  (it must stay ~1.0: the labels' cost falls between ops, not inside them);
* wall per call, unprofiled: what the instrumentation adds to a call (why the
  harness times the function on a separate, unlabelled pass).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "server"))

import torch  # noqa: E402

from trainium_lens.harness.eager import run  # noqa: E402
from trainium_lens.harness.eager.lines import LineLabeler  # noqa: E402
from trainium_lens.harness.job.loader import UserCode, load_module  # noqa: E402

sys.path.insert(0, str(HERE))
from attribution_bench import many_small_ops  # noqa: E402


def per_op_self_cpu(fn, args, labeler, steps: int) -> tuple[float, float]:
    """Mean self CPU of an ATen op in plain vs labelled steps of ONE profile.

    The steps alternate (plain, labelled, plain, ...) so that the load of a
    shared machine hits both sides alike; each step sits in its own range."""
    rf = torch._C._profiler._RecordFunctionFast
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for i in range(steps):
            if i % 2:
                with rf("bench: labelled"):
                    with labeler:
                        run.invoke(fn, args, {})
            else:
                with rf("bench: plain"):
                    run.invoke(fn, args, {})
    sums = {"bench: plain": [0.0, 0], "bench: labelled": [0.0, 0]}
    for e in prof.events():
        if not e.name.startswith("aten::"):
            continue
        parent = e.cpu_parent
        while parent is not None and parent.name not in sums:
            parent = parent.cpu_parent
        if parent is not None:
            sums[parent.name][0] += e.self_cpu_time_total
            sums[parent.name][1] += 1
    (a, na), (b, nb) = sums["bench: plain"], sums["bench: labelled"]
    return a / na, b / nb


def wall_per_call(fn, args, labeler, calls: int) -> float:
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        if labeler is not None:
            with labeler:
                run.invoke(fn, args, {})
        else:
            run.invoke(fn, args, {})
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    torch.set_num_threads(1)
    rms = load_module(str(ROOT / "examples" / "rmsnorm.py"), str(ROOT), "examples/rmsnorm.py")
    xs = [torch.randn(4) for _ in range(500)]
    ws = [torch.randn(4) for _ in range(500)]
    workloads = {
        "rms_norm_naive (6 ops, 4x512 bf16)": (rms.rms_norm_naive, rms.make_inputs(), 200, 500),
        "many_small_ops (1,500 ops, 4 floats)": (many_small_ops, (xs, ws), 4, 40),
    }
    print(
        f"torch {torch.__version__}, python {sys.version.split()[0]}, "
        f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}, {a.rounds} A/B rounds (medians)"
    )
    print(
        f"{'workload':40} {'self CPU/op without':>20} {'with':>8} {'ratio':>6} "
        f"{'(rounds min-max)':>16}   {'wall/call without':>18} {'with':>9} {'ratio':>6}"
    )
    for label, (fn, args, steps, calls) in workloads.items():
        labeler = LineLabeler(UserCode(str(ROOT)), run.invoke.__code__)
        for _ in range(3):  # warm up both paths
            run.invoke(fn, args, {})
            with labeler:
                run.invoke(fn, args, {})
        op_a, op_b, wall_a, wall_b = [], [], [], []
        for _ in range(a.rounds):
            plain, labelled = per_op_self_cpu(fn, args, labeler, 2 * steps)
            op_a.append(plain)
            op_b.append(labelled)
            wall_a.append(wall_per_call(fn, args, None, calls))
            wall_b.append(wall_per_call(fn, args, labeler, calls))
        oa, ob = statistics.median(op_a), statistics.median(op_b)
        wa, wb = statistics.median(wall_a), statistics.median(wall_b)
        ratios = [b / a for a, b in zip(op_a, op_b, strict=True)]
        print(
            f"{label:40} {oa:17.2f} µs {ob:6.2f} µs {statistics.median(ratios):5.2f}x "
            f"{min(ratios):7.2f}-{max(ratios):.2f}x   "
            f"{wa:15.1f} µs {wb:7.1f} µs {wb / wa:5.2f}x"
        )


if __name__ == "__main__":
    main()

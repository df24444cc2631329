"""Benchmark: what counting work costs, and why it has a call of its own.

    OMP_NUM_THREADS=1 .venv/bin/python bench/work_bench.py [--rounds 5]

Per workload, rounds of three measurements in turn (medians over the rounds,
ratios taken round by round so the machine's drift hits both sides):

* per-op self CPU of a labelled, profiled call as the timed steps record it,
  against the same call with ``record_shapes`` + ``profile_memory`` on: the
  inflation the timed figures would carry if the timed steps recorded shapes
  and allocations (why ``harness/work/step.py`` runs a separate call);
* wall of that profiled call with and without the recording;
* wall of the whole work step (the extra call with shapes, allocations and
  saved-tensor hooks, then ``work/figures.measure``) against one plain
  profiled call: what the feature adds to a run.

The CPU roof calibration (``work/calibrate.py``) is timed once at the end: it
runs once per host, then comes from the cache.
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
sys.path.insert(0, str(HERE))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from attribution_bench import many_small_ops  # noqa: E402
from models import tiny_gpt  # noqa: E402

from trainium_lens.harness.eager import run  # noqa: E402
from trainium_lens.harness.eager.backends import CpuBackend  # noqa: E402
from trainium_lens.harness.eager.lines import LineLabeler  # noqa: E402
from trainium_lens.harness.job.loader import UserCode  # noqa: E402
from trainium_lens.harness.work import calibrate, figures  # noqa: E402
from trainium_lens.harness.work.step import work_step  # noqa: E402


def gpt_train_step(model, opt, idx):
    logits = model(idx)
    loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), idx.view(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss.detach()


class BenchCall:
    """What ``work_step`` calls: the function, labelled or not (as ``run.Call``)."""

    def __init__(self, fn, args, labeler):
        self.fn, self.args, self.labeler, self.name = fn, args, labeler, fn.__name__

    def __call__(self, labelled: bool = False):
        if labelled:
            with self.labeler:
                return run.invoke(self.fn, self.args, {})
        return run.invoke(self.fn, self.args, {})


def profiled(call: BenchCall, record: bool) -> tuple[float, float]:
    """(mean self CPU µs of an ATen op, wall µs) of one labelled, profiled call."""
    t0 = time.perf_counter()
    with torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=record, profile_memory=record
    ) as prof:
        call(labelled=True)
    wall = (time.perf_counter() - t0) * 1e6
    ops = [e.self_cpu_time_total for e in prof.events() if e.name.startswith("aten::")]
    return sum(ops) / max(len(ops), 1), wall


def whole_work_step(call: BenchCall, backend) -> float:
    t0 = time.perf_counter()
    wp = work_step(call, backend)
    figures.measure(wp, call.labeler.labels, "", "cpu")
    return (time.perf_counter() - t0) * 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = tiny_gpt.TinyGPT().train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    idx = torch.randint(0, tiny_gpt.VOCAB, (2, tiny_gpt.CONTEXT))
    xs = [torch.randn(4) for _ in range(500)]
    ws = [torch.randn(4) for _ in range(500)]
    workloads = {
        "TinyGPT training step (2 layers, AdamW)": (gpt_train_step, (model, opt, idx)),
        "many_small_ops (1,500 ops, 4 floats)": (many_small_ops, (xs, ws)),
    }
    backend = CpuBackend(torch)
    print(
        f"torch {torch.__version__}, python {sys.version.split()[0]}, "
        f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}, {a.rounds} rounds (medians; ratios per round)"
    )
    for label, (fn, args) in workloads.items():
        labeler = LineLabeler(UserCode(str(HERE)), run.invoke.__code__)
        call = BenchCall(fn, args, labeler)
        for _ in range(2):  # warm up every path
            profiled(call, False)
            profiled(call, True)
            whole_work_step(call, backend)
        op_ratio, wall_ratio, work_ratio = [], [], []
        op_plain, wall_plain, work_wall = [], [], []
        for _ in range(a.rounds):
            op_a, wall_a = profiled(call, False)
            op_b, wall_b = profiled(call, True)
            w = whole_work_step(call, backend)
            op_ratio.append(op_b / op_a)
            wall_ratio.append(wall_b / wall_a)
            work_ratio.append(w / wall_a)
            op_plain.append(op_a)
            wall_plain.append(wall_a)
            work_wall.append(w)
        med = statistics.median
        print(f"\n{label}")
        print(
            f"  per-op self CPU, timed-step profile: {med(op_plain):.2f} µs; with shapes + memory: "
            f"{med(op_ratio):.2f}x ({min(op_ratio):.2f}-{max(op_ratio):.2f})"
        )
        print(
            f"  wall of a profiled call: {med(wall_plain) / 1000:.1f} ms; with shapes + memory: "
            f"{med(wall_ratio):.2f}x ({min(wall_ratio):.2f}-{max(wall_ratio):.2f})"
        )
        print(
            f"  the whole work step (call + hooks + figures): {med(work_wall) / 1000:.1f} ms = "
            f"{med(work_ratio):.2f}x one profiled call ({min(work_ratio):.2f}-{max(work_ratio):.2f})"
        )
    t0 = time.perf_counter()
    roof = calibrate.measure(torch)
    print(
        f"\nCPU roof calibration (once per host): {time.perf_counter() - t0:.2f} s -> "
        + ", ".join(f"{p['dtype']} {p['flops_per_s'] / 1e9:.0f} GFLOP/s" for p in roof["flops"])
        + f", copy {roof['bytes_per_s'] / 1e9:.1f} GB/s"
    )


if __name__ == "__main__":
    main()

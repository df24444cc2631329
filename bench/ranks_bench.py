"""torchrun jobs (``--nproc N``): what a multi-rank run costs.

    OMP_NUM_THREADS=1 .venv/bin/python bench/ranks_bench.py [--rounds 3] [--ranks 8] [--lines 2000]

1. Wall time of ``trainium-lens profile FILE --nproc 2`` (one CLI process, the
   launcher, torchrun's agent and two ranks) against two single-rank runs of
   the same function one after the other (the same profiling work, without
   torchrun) and against one single-rank run; rounds alternate A, B, C so the
   machine's drift hits each alike; ratios are per round, then the median.
2. Merge time (``ranks.merge_document``) of N ranks' results of L lines each
   (synthetic, 3 ops per line, one collective line), against validating the
   same N results (``Batch.from_dict``, the cost the core pays for any result).
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "server"))

from trainium_lens.model.ranks import merge_document  # noqa: E402
from trainium_lens.model.result import Batch  # noqa: E402

STEP = """import torch
import torch.distributed as dist


def make(rank, world_size):
    return torch.randn(256, 256), torch.randn(256, 256)


# trainium: profile inputs=make wait=0 warmup=1 active=3 timing_calls=5
def step(a, w):
    y = a @ w
    s = y.sum(0)
    if dist.is_initialized():
        dist.all_reduce(s)
    return s
"""


def cli(ws: Path, nproc: int) -> float:
    argv = [
        sys.executable,
        "-m",
        "trainium_lens",
        "profile",
        str(ws / "step.py"),
        "step",
        "--no-store",
        "--nproc",
        str(nproc),
    ]
    env = dict(os.environ, PYTHONPATH=str(ROOT / "server"), OMP_NUM_THREADS="1")
    t0 = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, env=env, cwd=ws)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(proc.stderr.decode()[-2000:])
    return wall


def launch(rounds: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        (ws / "step.py").write_text(STEP)
        subprocess.run(["git", "init", "-q", str(ws)], check=True)
        cli(ws, 2)  # warm-up: page cache, .pyc files
        two, pair, one = [], [], []
        for _ in range(rounds):
            two.append(cli(ws, 2))
            pair.append(cli(ws, 1) + cli(ws, 1))
            one.append(cli(ws, 1))
    ratio_pair = statistics.median(a / b for a, b in zip(two, pair, strict=True))
    ratio_one = statistics.median(a / b for a, b in zip(two, one, strict=True))
    print(f"wall, median of {rounds} rounds (load {os.getloadavg()[0]:.1f})")
    print(
        f"  --nproc 2                     {statistics.median(two):6.2f} s "
        f"(min {min(two):.2f}, max {max(two):.2f})"
    )
    print(
        f"  two single-rank runs, in turn {statistics.median(pair):6.2f} s "
        f"(min {min(pair):.2f}, max {max(pair):.2f})"
    )
    print(
        f"  one single-rank run           {statistics.median(one):6.2f} s "
        f"(min {min(one):.2f}, max {max(one):.2f})"
    )
    print(f"  ratio --nproc 2 / two runs {ratio_pair:.2f}x, / one run {ratio_one:.2f}x")


def synthetic_result(rank: int, lines: int) -> dict:
    stats = []
    for i in range(lines):
        t = 10.0 + (i % 97) * (1.5 if rank % 3 == 1 else 1.0)
        ops = [
            {
                "name": f"aten::op{k}",
                "calls": 1.0,
                "self_time_us": t / 3,
                "self_cpu_us": t / 3,
                "direct_calls": 1.0,
            }
            for k in range(3)
        ]
        if i == 0:
            ops = [
                {
                    "name": "c10d::wait",
                    "calls": 1.0,
                    "self_time_us": 100.0 * (rank % 2),
                    "self_cpu_us": 0.0,
                    "direct_calls": 1.0,
                }
            ]
        stats.append(
            {
                "file": "big.py",
                "line": i + 1,
                "self_time_us": t,
                "total_time_us": t,
                "self_cpu_us": t,
                "calls": 3.0,
                "self_time_us_min": t,
                "self_time_us_max": t,
                "self_time_us_median": t,
                "text": "x = x + 1",
                "function": "f",
                "ops": ops,
            }
        )
    return {
        "schema_version": 1,
        "run_id": "b-0",
        "batch_id": "b",
        "created_at": "2026-11-30T00:00:00",
        "backend": "cpu",
        "clock": "cpu",
        "host": "local",
        "function": {"file": "big.py", "name": "f", "line": 1},
        "totals": {
            "self_time_us": 1e5,
            "self_cpu_us": 1e5,
            "wall_us_median": 2e5,
            "steps": 5,
            "per_step_self_time_us": [1e5] * 5,
        },
        "ops": [
            {
                "name": f"aten::op{k}",
                "calls": 2000.0,
                "self_time_us": 1e4,
                "total_time_us": 1e4,
                "self_cpu_us": 1e4,
            }
            for k in range(3)
        ],
        "lines": stats,
        "artifacts": {"location": "local", "run_dir": f"/r/rank{rank}", "trace": None},
    }


def merge(n_ranks: int, lines: int, repeat: int = 5) -> None:
    results = [synthetic_result(r, lines) for r in range(n_ranks)]
    document = {
        "schema_version": 1,
        "batch_id": "b",
        "world_size": n_ranks,
        "results": [results[0]],
        "rank_batches": [{"rank": r, "batch": {"results": [res]}} for r, res in enumerate(results)],
    }
    merge_s, load_s, merged_load_s = [], [], []
    for _ in range(repeat):
        doc = copy.deepcopy(document)
        t0 = time.perf_counter()
        merged = merge_document(doc)
        merge_s.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        Batch.from_dict({"batch_id": "b", "results": results})
        load_s.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        Batch.from_dict(merged)
        merged_load_s.append(time.perf_counter() - t0)
    m, b = statistics.median(merge_s), statistics.median(load_s)
    print(f"merge of {n_ranks} ranks x {lines} lines, median of {repeat}")
    print(f"  ranks.merge_document            {m * 1000:7.1f} ms")
    print(f"  validating the {n_ranks} rank results   {b * 1000:7.1f} ms (baseline)")
    print(f"  validating the merged result    {statistics.median(merged_load_s) * 1000:7.1f} ms")
    print(f"  ratio merge / baseline {m / b:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--lines", type=int, default=2000)
    parser.add_argument("--skip-launch", action="store_true")
    args = parser.parse_args()
    merge(args.ranks, args.lines)
    if not args.skip_launch:
        launch(args.rounds)


if __name__ == "__main__":
    main()

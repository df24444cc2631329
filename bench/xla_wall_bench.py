"""Benchmark: nanoGPT's training step on the xla backend against the same step timed
without the tool, and every line's FLOP/s against the roof (issue: "the tool's wall
within ±10% of the step timed without the tool; no line above 100% of the FLOP/s peak").

    .venv/bin/python bench/xla_wall_bench.py --rounds 4      # needs bash scripts/setup-xla.sh

Each round: ``bench/independent_wall.py --xla`` (a fresh process of the torch-xla venv,
no trainium-lens: each call followed by ``torch_xla.sync()`` and ``wait_device_ops()``,
a ``perf_counter`` median of ``--calls``), then ``trainium-lens profile --backend xla``
of the same function (its ``totals.wall_us_median``), then the independent timing again;
their mean is the round's reference, and a round whose two sides differ by more than
``DRIFT`` is counted apart. The machine as it is (XLA's CPU runtime spreads each
instruction over every core: a quiet single CPU would time something else).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "server"))

from wall_bench import run_independent  # noqa: E402  (bench/, this script's folder)

from trainium_lens.analysis.roofline.peaks import resolve  # noqa: E402
from trainium_lens.analysis.roofline.points import line_roofs  # noqa: E402
from trainium_lens.model.result import Result  # noqa: E402

NANOGPT = ROOT / "tests" / "data" / "nanogpt"
DRIFT = 0.10


def xla_python() -> str:
    """The torch-xla venv's python (as tests/conftest.py finds it)."""
    path = Path(os.environ.get("TRAINIUM_LENS_XLA_PYTHON", ROOT / ".venv-xla" / "bin" / "python"))
    if not path.exists():
        raise SystemExit("no torch-xla venv: run bash scripts/setup-xla.sh first")
    return str(path)


def independent(python: str, function: str, calls: int) -> float:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PJRT_DEVICE"] = "CPU"
    return run_independent(
        [python], env, NANOGPT, "profile_gpt.py", function, "make_batch", "--xla", "--calls", str(calls)
    )


def tool(python: str, function: str) -> Result:
    out = Path(tempfile.mkdtemp(prefix="xla-wall-")) / "result.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "trainium_lens",
            "profile",
            "profile_gpt.py",
            function,
            "--backend",
            "xla",
            "--python",
            python,
            "--json",
            str(out),
            "--no-store",
        ],
        capture_output=True,
        text=True,
        cwd=str(NANOGPT),
        env={**os.environ, "PYTHONPATH": str(ROOT / "server")},
    )
    if proc.returncode != 0:
        raise SystemExit(f"trainium-lens failed\n{proc.stderr[-2000:]}")
    return Result.from_dict(json.loads(out.read_text()))


def highest_line(result: Result) -> tuple[float, str]:
    """The highest share of the FLOP/s peak of any line's forward or backward work."""
    roof = resolve(result)
    best, where = 0.0, ""
    for stat in result.lines:
        for point in line_roofs(result, stat, roof):
            if point.flops and point.time_us > 0 and point.peak_flops:
                share = point.flops / (point.time_us * 1e-6) / point.peak_flops
                if share > best:
                    best, where = share, f"{stat.file}:{stat.line} {point.phase}"
    return best, where


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--function", default="train_step")
    ap.add_argument("--calls", type=int, default=30)
    args = ap.parse_args()
    python = xla_python()
    with open("/proc/loadavg") as fh:
        print(f"load average {' '.join(fh.read().split()[:3])}; {args.rounds} rounds of {args.function}")
    print("| round | independent (before, after) | tool's wall | wall / independent | highest line |")
    print("| ---: | ---: | ---: | ---: | --- |")
    ratios, drifted = [], 0
    for k in range(1, args.rounds + 1):
        before = independent(python, args.function, args.calls)
        result = tool(python, args.function)
        after = independent(python, args.function, args.calls)
        wall = result.totals.wall_us_median or 0.0
        mean = (before + after) / 2
        share, where = highest_line(result)
        moved = max(before, after) / min(before, after) > 1 + DRIFT
        drifted += moved
        if not moved:
            ratios.append(wall / mean)
        print(
            f"| {k} | {before / 1e3:.1f}, {after / 1e3:.1f} ms | {wall / 1e3:.1f} ms "
            f"| {wall / mean:.3f}×{' (drifted)' if moved else ''} | {share:.0%} of the peak ({where}) |",
            flush=True,
        )
    if ratios:
        print(
            f"median wall / independent {statistics.median(ratios):.3f}× over {len(ratios)} rounds "
            f"({drifted} drifted); worst {max(ratios, key=lambda x: abs(x - 1)):.3f}×"
        )


if __name__ == "__main__":
    main()

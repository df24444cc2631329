"""Does the script run at full speed after the profiling window? (docs/scripts.md)

The same command with and without ``trainium-lens run``, alternated round by round
(the order flips each round: the machine's load drifts), for three setups:

* ``cpu``: nanoGPT's loop (tests/data/nanogpt/train.py) on the eager CPU backend;
* ``torchrun``: the same under ``torchrun --nproc-per-node 2`` (each rank its own loop);
* ``xla``: train_xla.py on torch-xla's CPU device, ``run --backend xla``.

The figure is the script's own: the ``iter k: …, time X ms`` it prints for each step.
For each run, the median of the steps after the window (from ``--after`` on: past the
window, the work step and the reference steps the hooks time, so the hooks are gone);
for each round, tool / plain. Under torchrun both ranks' lines count.

    .venv/bin/python bench/after_window_bench.py [--rounds 4] [--iters 40] [--after 16]
        [--setups cpu,torchrun,xla]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NANOGPT = ROOT / "tests" / "data" / "nanogpt"
XLA_PY = ROOT / ".venv-xla" / "bin" / "python"
TIMER = ROOT / "bench" / "script_timer.py"  # each step's process CPU time, beside the wall
ITER = re.compile(r"^iter (\d+): loss [-\d.na]+, time ([\d.]+)ms", re.M)


def command(setup: str, iters: int) -> tuple[list[str], list[str]]:
    """(the script's command, the tool's options)."""
    its = ["--max-iters", str(iters)]
    if setup == "cpu":
        return [sys.executable, str(TIMER), "train.py", *its], []
    if setup == "torchrun":
        torchrun = str(Path(sys.executable).parent / "torchrun")
        return [torchrun, "--nproc-per-node", "2", str(TIMER), "train.py", *its], []
    return [str(XLA_PY), str(TIMER), "train_xla.py", *its], ["--backend", "xla"]


def once(setup: str, tool: bool, iters: int, ws: Path, tmp: Path) -> tuple[dict[int, list[float]], dict]:
    script, options = command(setup, iters)
    env = {**os.environ, "TRAINIUM_LENS_CACHE": str(tmp / "cache"), "PYTHONPATH": str(ROOT / "server")}
    # one torch thread in both (as script_bench.py): on a loaded 2-core host two threads'
    # OpenMP barriers stall for seconds a step, and the figure would be that noise
    env.setdefault("OMP_NUM_THREADS", "1")
    cpu_file = tmp / "cpu.json"
    env["STEP_CPU_TIMES"] = str(cpu_file)
    cmd = script
    if tool:
        cmd = [sys.executable, "-m", "trainium_lens", "run", "--no-store", *options, "--", *script]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ws, env=env, capture_output=True, text=True, timeout=900)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        what = "tool" if tool else "plain"
        raise SystemExit(f"{setup} {what}: exit {proc.returncode}\n{proc.stderr[-2000:]}")
    steps: dict[int, list[float]] = {}
    for k, ms in ITER.findall(proc.stdout):
        steps.setdefault(int(k), []).append(float(ms))
    cpu: dict[int, list[float]] = {}  # iter k (0-based, as printed) -> process CPU ms, per rank
    for f in tmp.glob("cpu.json*"):
        ends = json.loads(f.read_text())
        for j, (a, b) in enumerate(zip(ends, ends[1:], strict=False)):
            cpu.setdefault(j + 1, []).append((b - a) * 1000)
        f.unlink()
    return steps, {"wall_s": wall, "cpu": cpu}


def after(steps: dict[int, list[float]], first: int) -> float:
    return statistics.median(t for k, ts in steps.items() if k >= first for t in ts)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--iters", type=int, default=40)
    ap.add_argument("--after", type=int, default=16, help="first iter counted (0-based, as printed)")
    ap.add_argument("--setups", default="cpu,torchrun,xla")
    args = ap.parse_args()
    setups = args.setups.split(",")
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        ws = tmp / "nanogpt"
        shutil.copytree(NANOGPT, ws)
        subprocess.run(["git", "init", "-q", str(ws)], check=True)
        ratios: dict[str, list[float]] = {s: [] for s in setups}
        cpu_ratios: dict[str, list[float]] = {s: [] for s in setups}
        for r in range(args.rounds):
            for setup in setups:
                runs = {}
                for tool in (r % 2 == 0, r % 2 != 0):  # plain first on odd rounds
                    runs[tool] = once(setup, tool, args.iters, ws, tmp)
                plain, with_tool = after(runs[False][0], args.after), after(runs[True][0], args.after)
                cpu_plain = after(runs[False][1]["cpu"], args.after)
                cpu_tool = after(runs[True][1]["cpu"], args.after)
                ratios[setup].append(with_tool / plain)
                cpu_ratios[setup].append(cpu_tool / cpu_plain)
                print(
                    f"round {r + 1} {setup}: after the window {with_tool:.2f} ms with the tool, "
                    f"{plain:.2f} ms without: {with_tool / plain:.3f}x; process CPU per step "
                    f"{cpu_tool:.2f} / {cpu_plain:.2f} ms: {cpu_tool / cpu_plain:.3f}x "
                    f"(load {os.getloadavg()[0]:.1f})",
                    flush=True,
                )
        for setup in setups:
            for what, rs in (("printed step time", ratios[setup]), ("process CPU", cpu_ratios[setup])):
                print(
                    f"{setup}: {what}, tool / plain after the window: median {statistics.median(rs):.3f}x "
                    f"(range {min(rs):.3f}-{max(rs):.3f}x over {len(rs)} rounds)"
                )


if __name__ == "__main__":
    main()

"""The xla backend's per-step figure of each rank of a torchrun job against the script's
own step timer without the tool (the goal: "the xla script's per-step figure against the
script's own step timer without the tool, per rank").

The script: nanoGPT's loop on torch-xla's CPU device (``tests/data/nanogpt/train_xla.py``,
``--loop step``: the body inside ``with torch_xla.step():``; ``--loop mark_step``:
``xm.optimizer_step`` + ``xm.mark_step()``) under ``torchrun --nproc-per-node 2``, each rank
printing ``iter k: loss …, time X ms`` for each of its steps. Each round, in an order that
flips round by round (the machine's load drifts):

* without the tool: torchrun with ``--tee 1`` and a ``[rank N]:`` line prefix, so each
  printed step names its rank; per rank, the median of its steps from ``--after`` on (the
  first ones compile their graphs);
* with ``trainium-lens run --backend xla --json`` (default window): per rank, the merged
  result's ``ranks[]`` (model/ranks.py): ``self_time_us``, the tool's per-step figure (on
  xla's device clock the instructions of a step, the figure ``run`` reconciles), and
  ``wall_us_median``, its reference (the rank's unprofiled steps, timed by the harness).

Per rank, each divided by the plain run's own median; median and range over the rounds.

    .venv/bin/python bench/xla_ranks_bench.py [--rounds 3] [--loop step|mark_step]   # after setup-xla.sh
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

from after_window_bench import ITER, NANOGPT, ROOT  # bench/, this script's folder
from xla_wall_bench import xla_python

RANKS = 2
# torchrun's own per-line prefix (--tee, TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE) before the
# script's printed step
PREFIX = "[rank${rank}]:"
PerRank = dict[int, tuple[float, float]]  # rank -> (the tool's per-step figure, its reference), ms
RANK_ITER = re.compile(r"^\[rank(\d+)\]:\s*" + ITER.pattern.removeprefix("^"), re.M)


def launch(tool: bool, args: argparse.Namespace, ws: Path, tmp: Path) -> str:
    """The job plainly or under ``run``; its stdout."""
    torchrun = str(Path(xla_python()).parent / "torchrun")
    script = ["train_xla.py", "--max-iters", str(args.iters), "--loop", args.loop]
    env = {**os.environ, "PJRT_DEVICE": "CPU", "TRAINIUM_LENS_CACHE": str(tmp / "cache")}
    # one torch thread (as after_window_bench.py): on a loaded 2-core host two threads'
    # OpenMP barriers stall for seconds a step
    env.setdefault("OMP_NUM_THREADS", "1")
    if tool:
        env["PYTHONPATH"] = str(ROOT / "server")
        cmd = [sys.executable, "-m", "trainium_lens", "run", "--backend", "xla", "--no-store"]
        cmd += ["--json", str(tmp / "out.json"), "--", torchrun, "--nproc-per-node", str(RANKS), *script]
    else:
        env.pop("PYTHONPATH", None)
        env["TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE"] = PREFIX
        cmd = [torchrun, "--nproc-per-node", str(RANKS), "--tee", "1", *script]
    proc = subprocess.run(cmd, cwd=ws, env=env, capture_output=True, text=True, timeout=1200)
    if proc.returncode != 0:
        what = "with the tool" if tool else "plain"
        raise SystemExit(f"{what}: exit {proc.returncode}\n{proc.stdout[-1500:]}\n{proc.stderr[-2500:]}")
    return proc.stdout


def plain(args: argparse.Namespace, ws: Path, tmp: Path) -> dict[int, float]:
    """Per rank, the script's own median step (ms) from ``--after`` on."""
    stdout = launch(False, args, ws, tmp)
    steps: dict[int, list[float]] = {}
    for rank, k, ms in RANK_ITER.findall(stdout):
        if int(k) >= args.after:
            steps.setdefault(int(rank), []).append(float(ms))
    if len(steps) != RANKS:
        raise SystemExit(f"plain: steps of ranks {sorted(steps)} printed, not of {RANKS}\n{stdout[-1500:]}")
    return {rank: statistics.median(ms) for rank, ms in steps.items()}


def with_tool(args: argparse.Namespace, ws: Path, tmp: Path) -> tuple[PerRank, float, str]:
    """Per rank, the tool's per-step figure and its reference (ms); beside them the script's
    own printed step under the tool from ``--settled`` on (both ranks: no prefix names them
    here), and ``run``'s own check of the figure (its ``reconciliation``)."""
    stdout = launch(True, args, ws, tmp)
    doc = json.loads((tmp / "out.json").read_text())
    result = doc["results"][0] if "results" in doc else doc
    ranks = {
        int(r["rank"]): (r["self_time_us"] / 1e3, (r.get("wall_us_median") or float("nan")) / 1e3)
        for r in result.get("ranks") or []
    }
    if len(ranks) != RANKS:
        raise SystemExit(f"with the tool: a result of ranks {sorted(ranks)}, not of {RANKS}")
    late = [float(ms) for k, ms in ITER.findall(stdout) if int(k) >= args.settled]
    check = result.get("reconciliation") or {}
    said = f"{check.get('reference')} {check.get('ratio', float('nan')):.2f}x, within {check.get('within')}"
    return ranks, statistics.median(late) if late else float("nan"), said


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f}× ({min(values):.2f}–{max(values):.2f}×)"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--loop", choices=["step", "mark_step"], default="step")
    # the default window (3:5), the work step, the settling steps and the reference's after them
    ap.add_argument("--iters", type=int, default=16, help="steps of the script")
    ap.add_argument("--after", type=int, default=3, help="the plain run's first step counted (0-based)")
    ap.add_argument(
        "--settled", type=int, default=9, help="under the tool: the first step past the work step"
    )
    args = ap.parse_args()
    t0 = time.monotonic()
    rows: dict[int, list[tuple[float, float, float]]] = {}  # rank -> (own ms, tool ms, reference ms)
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        ws = tmp / "nanogpt"
        shutil.copytree(NANOGPT, ws)
        subprocess.run(["git", "init", "-q", str(ws)], check=True)
        for r in range(args.rounds):
            if r % 2 == 0:  # the plain run first on odd rounds (1, 3, …), the tool's first on even ones
                own_ms = plain(args, ws, tmp)
                tool_ms, under, said = with_tool(args, ws, tmp)
            else:
                tool_ms, under, said = with_tool(args, ws, tmp)
                own_ms = plain(args, ws, tmp)
            for rank in sorted(own_ms):
                own, (figure, ref) = own_ms[rank], tool_ms[rank]
                rows.setdefault(rank, []).append((own, figure, ref))
                print(
                    f"round {r + 1} rank {rank}: own {own:.2f} ms, "
                    f"tool {figure:.2f} ms ({figure / own:.2f}x), "
                    f"reference {ref:.2f} ms ({ref / own:.2f}x), load {os.getloadavg()[0]:.1f}",
                    flush=True,
                )
            print(
                f"round {r + 1}: the script's own step under the tool from iter {args.settled} on, "
                f"both ranks, {under:.2f} ms; run's check: {said}",
                flush=True,
            )
    print(f"\n`--loop {args.loop}`, {args.rounds} rounds, torchrun --nproc-per-node {RANKS}:\n")
    print("| rank | own median step | tool's figure / own | reference / own |")
    print("| ---: | ---: | ---: | ---: |")
    for rank, rs in sorted(rows.items()):
        own = [x[0] for x in rs]
        print(
            f"| {rank} | {statistics.median(own):.2f} ms ({min(own):.2f}–{max(own):.2f}) "
            f"| {spread([x[1] / x[0] for x in rs])} | {spread([x[2] / x[0] for x in rs])} |"
        )
    print(f"\nload average {os.getloadavg()}, {os.cpu_count()} cores; {time.monotonic() - t0:.0f} s")


if __name__ == "__main__":
    main()

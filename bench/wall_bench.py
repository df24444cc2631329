"""Benchmark: is the tool's reference wall honest? Each case's unprofiled wall
(the result's ``totals.wall_us_median``, timed by the harness after the profiled
steps) against an independent wall of the same function: ``bench/independent_wall.py``
in a fresh process (no trainium-lens imported), a plain ``time.perf_counter`` median
over hundreds of calls, timed just before and just after the tool's run (their
mean cancels a steady drift of this VM's speed; a round whose two sides differ by
more than ``DRIFT`` is counted as drifted and compares nothing), ``--rounds``
times, so that the load other sessions put on the machine falls on both alike.

    .venv/bin/python bench/wall_bench.py                 # quiet CPU (root), 1 intra-op thread
    .venv/bin/python bench/wall_bench.py --rounds 5 --only rmsnorm

Goal: the tool's wall within ±3% of the independent one, per case (median of
the rounds' ratios); the worst round is printed beside it. The per-call figure
(the result's lines' sum) is printed against the same independent wall.
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
sys.path.insert(0, str(ROOT))

from tests.support import quiet_cpu  # noqa: E402
from trainium_lens.analysis.findings.analyze import analyze  # noqa: E402
from trainium_lens.analysis.reconcile import reconcile  # noqa: E402
from trainium_lens.model.result import Batch  # noqa: E402

FLAGS = {"noisy_measurement", "unreconciled"}  # findings that say the figure may be off
MARGIN = 0.15  # the goal: every eager figure within ±15% of the independent wall, or flagged
DRIFT = 0.10  # the independent wall before and after the tool's run this far apart: the VM drifted

# (workspace, file, function, inputs function)
CASES = [
    (ROOT, "examples/rmsnorm.py", "rms_norm_naive", "make_inputs"),
    (ROOT, "examples/rmsnorm.py", "rms_norm_fused", "make_inputs"),
    (ROOT, "examples/rmsnorm.py", "rms_norm_compiled", "make_inputs"),
    (ROOT, "examples/train_step.py", "train_step_naive", "make_training"),
    (ROOT, "tests/data/noisy.py", "steady", "make_inputs"),
    (ROOT / "tests" / "data" / "project", "src/tinygpt/bench.py", "forward", "forward_inputs"),
    (ROOT / "tests" / "data" / "project", "src/tinygpt/bench.py", "train_step", "train_inputs"),
    # karpathy's nanoGPT (model.py as published), 2 layers, AdamW: the real-model case
    (ROOT / "tests" / "data" / "nanogpt", "profile_gpt.py", "forward", "make_batch"),
    (ROOT / "tests" / "data" / "nanogpt", "profile_gpt.py", "train_step", "make_batch"),
]


def label(file: str, function: str) -> str:
    """The function's name, or ``file:function`` where two cases share the name."""
    return function if sum(c[2] == function for c in CASES) == 1 else f"{Path(file).stem}:{function}"


SERVER = ROOT / "server"  # --server: another checkout's harness (a before/after comparison)


def _argv(quiet: bool) -> tuple[list[str], dict]:
    env = dict(os.environ, PYTHONPATH=str(SERVER))
    if not quiet:
        return [sys.executable], env
    env["OMP_NUM_THREADS"] = "1"
    return [sys.executable, *quiet_cpu.launcher_args(0)], env


def tool(workspace: Path, file: str, function: str, quiet: bool) -> dict:
    run_dir = Path(tempfile.mkdtemp(prefix="wall-")) / "run"
    spec = {
        "spec_version": 1,
        "batch_id": "wall",
        "workspace_root": str(workspace),
        "file": file,
        "functions": [function],
        "line": None,
        "backend": "cpu",
        "protocol": {},
        "run_dir": str(run_dir),
        "host": "local",
    }
    argv, env = _argv(quiet)
    proc = subprocess.run(
        [*argv, "-m", "trainium_lens.harness"],
        input=json.dumps(spec),
        capture_output=True,
        text=True,
        env=env,
        cwd=str(workspace),
    )
    if proc.returncode != 0:
        raise SystemExit(f"{file}: harness failed\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    r = Batch.from_dict(json.loads((run_dir / "batch.json").read_text())).results[0]
    lines = sum(s.time_us for s in r.lines) + r.unattributed_us + (r.totals.host_time_us or 0.0)
    # the same with the host time as the gaps read it, before the wall bounded it (build.host_scale)
    read = r.calibration.host_read_us if r.calibration and r.calibration.host_read_us is not None else None
    as_read = (
        lines - (r.totals.host_time_us or 0.0) + (read if read is not None else r.totals.host_time_us or 0.0)
    )
    r.reconciliation = reconcile(r)
    # flagged: the result says its figure may be off (noisy, or out of its tolerance)
    flagged = any(f.kind in FLAGS for f in analyze(r))
    bounded = r.calibration is not None and r.calibration.per_depth_read_us is not None
    return {
        "wall": r.totals.wall_us_median or 0.0,
        "lines": lines,
        "as_read": as_read,
        "flagged": flagged,
        "bounded": bounded,  # the calibration bounded by the wall (build.calibration_kept)
        "note": r.reconciliation.note if r.reconciliation else "",
    }


def independent(workspace: Path, file: str, function: str, inputs: str, quiet: bool) -> float:
    argv, env = _argv(quiet)
    env.pop("PYTHONPATH")
    return run_independent(argv, env, workspace, file, function, inputs)


def run_independent(
    argv: list[str], env: dict, workspace: Path, file: str, function: str, inputs: str, *extra: str
) -> float:
    """``bench/independent_wall.py`` under ``argv`` (an interpreter and its launcher), in a fresh
    process: its median, µs (also ``bench/xla_wall_bench.py``'s, with ``--xla``)."""
    proc = subprocess.run(
        [
            *argv,
            str(ROOT / "bench" / "independent_wall.py"),
            file,
            function,
            inputs,
            "--root",
            str(workspace),
            *extra,
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=str(workspace),
    )
    if proc.returncode != 0:
        raise SystemExit(f"{file}: independent timer failed\n{proc.stderr[-2000:]}")
    return float(json.loads(proc.stdout.strip().splitlines()[-1])["median_us"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--as-is", action="store_true", help="the machine as it is (no quiet CPU)")
    ap.add_argument("--only", help="run only cases whose file or function contains this text")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--server", help="the server/ folder whose harness is timed (default: this checkout's)")
    ap.add_argument("--rounds-json", help="write every round (tool's figures, independent wall) to this file")
    args = ap.parse_args()
    global SERVER
    SERVER = Path(args.server).resolve() if args.server else SERVER
    quiet = not args.as_is
    why = quiet_cpu.available() if quiet else None
    if why:
        raise SystemExit(f"no quiet CPU here ({why}): run with --as-is")
    with open("/proc/loadavg") as fh:
        load = " ".join(fh.read().split()[:3])
    print(
        f"{'quiet CPU, 1 intra-op thread' if quiet else 'as is'}; load average {load}; {args.rounds} rounds"
    )
    print(
        "| case | independent wall | tool's wall | wall / independent (median, worst) "
        "| lines / independent (median, worst) | outside ±15%, unflagged "
        "| host as read: lines / independent (median, worst) |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    every: list[dict] = []
    for workspace, file, function, inputs in CASES:
        if args.only and args.only not in file and args.only not in function:
            continue
        name = label(file, function)
        walls, ind, lines, read, missed, drifted = [], [], [], [], 0, 0
        for _ in range(args.rounds):
            # the independent wall on both sides of the tool's run: this VM's speed drifts
            # (the same function read 30.7 and 20.2 µs in two processes a second apart),
            # and their mean cancels a steady drift; a round whose two sides disagree by
            # more than DRIFT compares nothing and is counted apart
            before = independent(workspace, file, function, inputs, quiet)
            t = tool(workspace, file, function, quiet)
            after = independent(workspace, file, function, inputs, quiet)
            i = (before + after) / 2
            if max(before, after) / min(before, after) > 1 + DRIFT:
                drifted += 1
                every.append({"case": name, **t, "independent": [before, after], "drifted": True})
                continue
            walls.append(t["wall"] / i)
            lines.append(t["lines"] / i)
            read.append(t["as_read"] / i)
            missed += abs(t["lines"] / i - 1) > MARGIN and not t["flagged"]
            ind.append(i)
            every.append({"case": name, **t, "independent": [before, after]})
        if not walls:
            print(f"| {name} | every round drifted ({drifted}) | | | | | |", flush=True)
            continue
        worst_w = max(walls, key=lambda x: abs(x - 1))
        worst_l = max(lines, key=lambda x: abs(x - 1))
        worst_r = max(read, key=lambda x: abs(x - 1))
        ind_us, wall_r, line_r = statistics.median(ind), statistics.median(walls), statistics.median(lines)
        print(
            f"| {name} | {_us(ind_us)} | {_us(ind_us * wall_r)} "
            f"| {wall_r:.3f}× ({worst_w:.3f}×) | {line_r:.3f}× ({worst_l:.3f}×) "
            f"| {missed} of {len(walls)} ({drifted} drifted) "
            f"| {statistics.median(read):.3f}× ({worst_r:.3f}×) |",
            flush=True,
        )
        if args.rounds_json:
            Path(args.rounds_json).write_text(json.dumps(every, indent=1))


def _us(v: float) -> str:
    return f"{v / 1000:.2f} ms" if v >= 1000 else f"{v:.1f} µs"


if __name__ == "__main__":
    main()

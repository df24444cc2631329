"""Benchmark: are the figures true? Every example and real-model case against
its own unprofiled wall, measured side by side in one harness run.

    .venv/bin/python bench/accuracy_bench.py            # a quiet CPU (root), 1 intra-op thread
    .venv/bin/python bench/accuracy_bench.py --as-is    # the machine as it is

Per function: the unprofiled wall median; the raw profiled per-call op sum
(the profiler's CPU self time of every op); the calibrated op sum (its measured
cost per op event subtracted, ``harness/eager/calibrate.py``); the host time
between ops (Python, the autograd engine: read from the unlabelled steps'
gaps); the lines' sum (calibrated ops + host time, what the result's lines add
up to); the ratios to the wall; how many measured steps were undisturbed; the
noise verdict (``analysis/noise.py``); the calibration's own cost in the run.

Both figures come from the same process and the same minutes: the wall is timed
right after the profiled steps, each on settled calls. By default each file runs
on one CPU whose scheduling group has the highest priority (the noise tests'
``tests/support/quiet_cpu.py``) with one intra-op thread: on the shared 2-core
development machine, other sessions' processes otherwise take most of the CPU
and OpenMP's parallel regions stall on it, so nearly every step is disturbed
(``--as-is`` shows that: the runs are flagged noisy).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "server"))
sys.path.insert(0, str(ROOT))

from tests.support import quiet_cpu  # noqa: E402
from trainium_lens.analysis.findings.analyze import analyze  # noqa: E402
from trainium_lens.analysis.reconcile import reconcile  # noqa: E402
from trainium_lens.model.result import Batch, Result  # noqa: E402

# (workspace, file): every marked function of the file
CASES = [
    (ROOT, "examples/rmsnorm.py"),
    (ROOT, "examples/train_step.py"),
    (ROOT / "tests" / "data" / "project", "src/tinygpt/bench.py"),
    (ROOT / "bench" / "models", "tiny_gpt.py"),
    (ROOT / "bench" / "models", "hf_models.py"),
    (ROOT / "bench" / "models", "compiled_gpt.py"),
]


def run(workspace: Path, file: str, quiet: bool) -> tuple[list[Result], float]:
    run_dir = Path(tempfile.mkdtemp(prefix="accuracy-")) / "run"
    spec = {
        "spec_version": 1,
        "batch_id": "accuracy",
        "workspace_root": str(workspace),
        "file": file,
        "functions": [],
        "line": None,
        "backend": "cpu",
        "protocol": {},
        "run_dir": str(run_dir),
        "host": "local",
    }
    env = dict(os.environ, PYTHONPATH=str(ROOT / "server"))
    argv = [sys.executable, "-m", "trainium_lens.harness"]
    if quiet:
        env["OMP_NUM_THREADS"] = "1"
        argv = [sys.executable, *quiet_cpu.launcher_args(0), "-m", "trainium_lens.harness"]
    t0 = time.perf_counter()
    proc = subprocess.run(
        argv, input=json.dumps(spec), capture_output=True, text=True, env=env, cwd=str(workspace)
    )
    took = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{file}: harness failed\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    batch = Batch.from_dict(json.loads((run_dir / "batch.json").read_text()))
    for r in batch.results:
        r.reconciliation = reconcile(r)
        r.findings = analyze(r)
    return batch.results, took


def row(file: str, r: Result) -> str:
    t, st, cal = r.totals, r.stability, r.calibration
    ops = sum(s.time_us for s in r.lines) + r.unattributed_us  # calibrated op self time
    host = t.host_time_us or 0.0
    raw = t.self_cpu_us
    wall = t.wall_us_median or 0.0
    noisy = any(f.kind == "noisy_measurement" for f in r.findings)
    clean = f"{st.steps_clean}/{st.steps_measured}" if st else "-"
    compiled = " (compiled)" if r.regions else ""
    return (
        f"| {file} | {r.function.name}{compiled} | {_us(wall)} | {_us(raw)} | {_us(ops)} | {_us(host)} | "
        f"{_us(ops + host)} | {raw / wall:.2f}× | **{(ops + host) / wall:.2f}×** | {clean} | "
        f"{'noisy' if noisy else 'quiet'} | {cal.cost_s if cal else 0:.2f} s |"
    )


def _us(v: float) -> str:
    return f"{v / 1000:.2f} ms" if v >= 1000 else f"{v:.1f} µs"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--as-is", action="store_true", help="the machine as it is (no quiet CPU)")
    ap.add_argument("--only", help="run only files containing this text")
    args = ap.parse_args()
    quiet = not args.as_is
    why = quiet_cpu.available() if quiet else None
    if why:
        raise SystemExit(f"no quiet CPU here ({why}): run with --as-is")
    with open("/proc/loadavg") as fh:
        load = fh.read().split()[:3]
    print(f"{'quiet CPU, 1 intra-op thread' if quiet else 'as is'}; load average {' '.join(load)}")
    print(
        "| file | function | wall (unprofiled) | raw op sum | calibrated op sum | host between ops "
        "| lines (calibrated) | raw / wall | lines / wall | clean steps | verdict | calibration |"
    )
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |")
    for workspace, file in CASES:
        if args.only and args.only not in file:
            continue
        results, _took = run(workspace, file, quiet)
        for r in results:
            print(row(file, r), flush=True)


if __name__ == "__main__":
    main()

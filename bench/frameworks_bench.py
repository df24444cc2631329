"""``trainium-lens run``'s per-step figure on the framework scripts of the tests
against each script's own step timer (docs/scripts.md, "Training frameworks").

The scripts: the Hugging Face Trainer (``tests/data/scripts/hf/trainer.py``: a
tiny random Llama, gradient accumulation 2, a ``TrainerCallback`` timing one
step's end to the next) and Lightning (``tests/data/scripts/lit.py``: automatic
optimization, AdamW, a ``Callback`` timing one batch's end to the next). Each
prints ``median step X ms`` (its steps from the third on) at its end.

Rounds, alternated (the machine's load drifts): the script run plainly, its own
median step; then ``run --json`` on the same command (default window), the
tool's per-step figure (op time + host time between ops, per optimizer step)
and its reference (the script's unprofiled steps, timed by the harness), each
divided by the plain run's own median step. Within ±25% is the goal.

    .venv/bin/python bench/frameworks_bench.py [--rounds 5] [--steps 14]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "tests" / "data" / "scripts"
FRAMEWORKS = {"trainer": "hf/trainer.py", "lightning": "lit.py"}
MEDIAN = re.compile(r"median step ([\d.]+) ms")


def own_median_ms(stdout: str) -> float:
    found = MEDIAN.search(stdout)
    if not found:
        raise SystemExit(f"the script printed no median step:\n{stdout[-2000:]}")
    return float(found.group(1))


def once(script: str, steps: int, tool: bool, tmp: Path) -> tuple[float, dict | None]:
    out = tmp / "out.json"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TRAINIUM_LENS_CACHE": str(tmp / "c")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    cmd = ["python", script, "--steps", str(steps)]
    if tool:
        env["PYTHONPATH"] = str(ROOT / "server")
        cmd = [sys.executable, "-m", "trainium_lens", "run", "--no-store", "--json", str(out), "--", *cmd]
    proc = subprocess.run(cmd, cwd=SCRIPTS, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return own_median_ms(proc.stdout), json.loads(out.read_text()) if tool else None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=14)
    ap.add_argument("--only", choices=sorted(FRAMEWORKS), help="one framework only")
    args = ap.parse_args()
    names = [args.only] if args.only else list(FRAMEWORKS)
    rows: dict[str, list[dict]] = {n: [] for n in names}
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for r in range(args.rounds):
            for name in names:
                own_ms, _ = once(FRAMEWORKS[name], args.steps, False, tmp)
                _, doc = once(FRAMEWORKS[name], args.steps, True, tmp)
                assert doc is not None
                t = doc["totals"]
                tool_ms = (t["self_time_us"] + (t.get("host_time_us") or 0.0)) / 1e3
                ref_ms = (t.get("wall_us_median") or float("nan")) / 1e3
                row = {
                    "own_ms": own_ms,
                    "tool_ms": tool_ms,
                    "ref_ms": ref_ms,
                    "tool_ratio": tool_ms / own_ms,
                    "ref_ratio": ref_ms / own_ms,
                    "detector": doc["script"].get("detector"),
                }
                rows[name].append(row)
                print(
                    f"round {r + 1} {name:9} ({row['detector']}): own {own_ms:.2f} ms, "
                    f"tool {tool_ms:.2f} ms ({row['tool_ratio']:.2f}x), "
                    f"reference {ref_ms:.2f} ms ({row['ref_ratio']:.2f}x)",
                    flush=True,
                )
    print()
    print(f"{'framework':10} {'rounds':>6} {'own ms':>8} {'tool/own':>18} {'reference/own':>18}")
    for name, rs in rows.items():

        def spread(key: str, rs: list[dict] = rs) -> str:
            v = [x[key] for x in rs]
            return f"{statistics.median(v):.2f} ({min(v):.2f}-{max(v):.2f})"

        own = statistics.median(x["own_ms"] for x in rs)
        print(f"{name:10} {len(rs):>6} {own:>8.2f} {spread('tool_ratio'):>18} {spread('ref_ratio'):>18}")
    print(f"load average {os.getloadavg()}, {os.cpu_count()} cores; {time.monotonic() - t0:.0f} s")


if __name__ == "__main__":
    main()

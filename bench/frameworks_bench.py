"""``trainium-lens run``'s per-step figure on the framework scripts of the tests
against each script's own step timer (docs/scripts.md, "Training frameworks").

The scripts: the Hugging Face Trainer (``tests/data/scripts/hf/trainer.py``: a
tiny random Llama, gradient accumulation 2, a ``TrainerCallback`` timing one
step's end to the next) and Lightning (``tests/data/scripts/lit.py``: automatic
optimization, AdamW, a ``Callback`` timing one update's last batch end to the
next), alone (``lightning``) and with ``accumulate_grad_batches=2``
(``lightning-acc2``). Each prints ``median step X ms`` (its steps from the
fourth on) at its end.

Rounds, alternated (the machine's load drifts): the script run plainly, its own
median step; then ``run --json`` on the same command (default window), the
tool's per-step figure (op time + host time between ops, per optimizer step)
and its reference (the script's unprofiled steps, timed by the harness), each
divided by the plain run's own median step. Within ±25% is the goal.
``--old PATH``: a second checkout's server (e.g. a ``git worktree`` of an older
commit) run the same way in each round, beside this one: its figures as ``old``.

    .venv/bin/python bench/frameworks_bench.py [--rounds 5] [--steps 20] [--only NAME] [--old PATH]
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
FRAMEWORKS = {
    "trainer": ["hf/trainer.py"],
    "lightning": ["lit.py"],
    "lightning-acc2": ["lit.py", "--accumulate", "2"],
}
MEDIAN = re.compile(r"median step ([\d.]+) ms")


def own_median_ms(stdout: str) -> float:
    found = MEDIAN.search(stdout)
    if not found:
        raise SystemExit(f"the script printed no median step:\n{stdout[-2000:]}")
    return float(found.group(1))


def once(script: list[str], steps: int, server: Path | None, tmp: Path) -> tuple[float, dict | None]:
    """The script plainly (``server`` None) or under ``run`` from that server tree."""
    out = tmp / "out.json"
    tool = server is not None
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TRAINIUM_LENS_CACHE": str(tmp / "c")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    cmd = ["python", *script, "--steps", str(steps)]
    if tool:
        env["PYTHONPATH"] = str(server)
        cmd = [sys.executable, "-m", "trainium_lens", "run", "--no-store", "--json", str(out), "--", *cmd]
    proc = subprocess.run(cmd, cwd=SCRIPTS, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return own_median_ms(proc.stdout), json.loads(out.read_text()) if tool else None


def _row(own_ms: float, doc: dict) -> dict:
    t = doc["totals"]
    tool_ms = (t["self_time_us"] + (t.get("host_time_us") or 0.0)) / 1e3
    ref_ms = (t.get("wall_us_median") or float("nan")) / 1e3
    return {
        "own_ms": own_ms,
        "tool_ms": tool_ms,
        "ref_ms": ref_ms,
        "tool_ratio": tool_ms / own_ms,
        "ref_ratio": ref_ms / own_ms,
        "within": bool(doc.get("reconciliation", {}).get("within")),
        "detector": doc["script"].get("detector"),
        "micro": doc["script"].get("micro_batches"),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--only", choices=sorted(FRAMEWORKS), action="append", help="these frameworks only")
    ap.add_argument("--old", type=Path, help="another checkout's server/ to run beside this one")
    args = ap.parse_args()
    names = args.only or list(FRAMEWORKS)
    servers = {"new": ROOT / "server", **({"old": args.old} if args.old else {})}
    rows: dict[str, list[dict]] = {f"{n} {s}": [] for n in names for s in servers}
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for r in range(args.rounds):
            for name in names:
                own_ms, _ = once(FRAMEWORKS[name], args.steps, None, tmp)
                for which, server in servers.items():
                    _, doc = once(FRAMEWORKS[name], args.steps, server, tmp)
                    assert doc is not None
                    row = _row(own_ms, doc)
                    rows[f"{name} {which}"].append(row)
                    print(
                        f"round {r + 1} {name} {which} ({row['detector']}, {row['micro']} micro-batches): "
                        f"own {own_ms:.2f} ms, tool {row['tool_ms']:.2f} ms ({row['tool_ratio']:.2f}x), "
                        f"reference {row['ref_ms']:.2f} ms ({row['ref_ratio']:.2f}x), "
                        f"flagged {not row['within']}, load {os.getloadavg()[0]:.1f}",
                        flush=True,
                    )
    print()
    head = f"{'framework':20} {'rounds':>6} {'own ms':>8} {'tool/own':>18} {'reference/own':>18}"
    print(f"{head} {'flagged':>8}")
    for name, rs in rows.items():

        def spread(key: str, rs: list[dict] = rs) -> str:
            v = [x[key] for x in rs]
            return f"{statistics.median(v):.2f} ({min(v):.2f}-{max(v):.2f})"

        own = statistics.median(x["own_ms"] for x in rs)
        flagged = sum(1 for x in rs if not x["within"])
        print(
            f"{name:20} {len(rs):>6} {own:>8.2f} {spread('tool_ratio'):>18} {spread('ref_ratio'):>18} "
            f"{flagged:>8}"
        )
    print(f"load average {os.getloadavg()}, {os.cpu_count()} cores; {time.monotonic() - t0:.0f} s")


if __name__ == "__main__":
    main()

"""Benchmark: figures checked against what they were not fitted to.

Per round and case: README's main command (``trainium-lens profile FILE [FUNCTION]
--json``, a fresh process, the CLI as a user runs it) between two independent walls
of the same function (``bench/independent_wall.py``: a plain ``time.perf_counter``
median in a fresh process, no trainium-lens imported), one just before the tool and
one just after (their mean cancels a steady drift; a round whose two sides differ by
more than ``DRIFT`` is counted apart). The bundled RMSNorm example runs as README runs
it (all three variants in one batch: one tool run, three independent walls on each
side); nanoGPT's forward and training step each alone.

Printed per case, over the rounds (median, then min–max):

- ``rec``: the reconciliation's ratio — the figure the fit to the wall did not touch
  (``Result.fit``: the calibration as read, the host time as read) over the tool's
  own unprofiled wall. It varies from run to run; it is never 1.000 by construction.
- ``fit``: the share of the figure shown that the fit supplied (``MOSTLY`` above 25%).
- ``shown / ind`` and ``unfitted / ind``: the figure shown (ops + host, fitted) and the
  unfitted one, each over the independent wall.
- ``outside ±15%, unflagged``: rounds whose figure shown is off the independent wall by
  more than 15% with no ``noisy_measurement``/``unreconciled`` finding to say so.

    .venv/bin/python bench/truth_bench.py --rounds 10
    .venv/bin/python bench/truth_bench.py --rounds 3 --only rms_norm
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
NANOGPT = ROOT / "tests" / "data" / "nanogpt"
FLAGS = {"noisy_measurement", "unreconciled"}  # findings that say the figure may be off
MARGIN = 0.15
DRIFT = 0.10
MOSTLY = 0.25  # model/fit.MOSTLY_FIT

# (label, workspace, file, functions profiled in one run (None: all, as README), inputs)
RUNS = [
    ("rmsnorm", ROOT, "examples/rmsnorm.py", None, ["rms_norm_naive", "rms_norm_fused", "rms_norm_compiled"]),
    ("nanogpt forward", NANOGPT, "profile_gpt.py", "forward", ["forward"]),
    ("nanogpt train_step", NANOGPT, "profile_gpt.py", "train_step", ["train_step"]),
]
INPUTS = {"examples/rmsnorm.py": "make_inputs", "profile_gpt.py": "make_batch"}


def tool(workspace: Path, file: str, function: str | None) -> list[dict]:
    """The CLI's ``--json`` results (analysed: findings and reconciliation filled)."""
    out = Path(tempfile.mkdtemp(prefix="truth-")) / "results.json"
    argv = [sys.executable, "-m", "trainium_lens", "profile", file, *([function] if function else [])]
    argv += ["--workspace", str(workspace), "--json", str(out), "--no-store"]
    env = dict(os.environ, PYTHONPATH=str(ROOT / "server"))
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=str(workspace), env=env)
    if proc.returncode != 0:
        raise SystemExit(f"{file}: trainium-lens failed\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    data = json.loads(out.read_text())
    return data if isinstance(data, list) else [data]  # one function: its result alone


CALLS = 200  # the independent timer's calls (--calls)


def independent(workspace: Path, file: str, function: str) -> float:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "independent_wall.py"), file, function, INPUTS[file]]
        + ["--root", str(workspace), "--calls", str(CALLS)],
        capture_output=True,
        text=True,
        env=env,
        cwd=str(workspace),
    )
    if proc.returncode != 0:
        raise SystemExit(f"{file}: independent timer failed\n{proc.stderr[-2000:]}")
    return float(json.loads(proc.stdout.strip().splitlines()[-1])["median_us"])


def figures_of(doc: dict) -> dict:
    t, fit, rec = doc["totals"], doc.get("fit") or {}, doc.get("reconciliation") or {}
    shown = t["self_time_us"] + (t.get("host_time_us") or 0.0)
    return {
        "shown": shown,
        "unfitted": fit.get("unfitted_us", shown),
        "share": fit.get("share", 0.0),
        "rec": rec.get("ratio"),
        "within": rec.get("within"),
        "exact": rec.get("profiled_us") == rec.get("reference_us"),
        "flagged": any(f["kind"] in FLAGS for f in doc.get("findings", [])),
        "wall": t.get("wall_us_median"),
        "wall_min": t.get("wall_us_min"),
        "before": (doc.get("stability") or {}).get("wall_before_us"),
    }


def spread(values: list[float]) -> str:
    if not values:
        return "–"
    return f"{statistics.median(values):.3f} ({min(values):.3f}–{max(values):.3f})"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", help="only the runs whose label contains this text")
    ap.add_argument("--rounds-json", help="write every round to this file")
    ap.add_argument("--calls", type=int, default=CALLS, help="the independent timer's calls per wall")
    args = ap.parse_args()
    globals()["CALLS"] = args.calls
    with open("/proc/loadavg") as fh:
        load = " ".join(fh.read().split()[:3])
    print(f"{args.rounds} rounds; load average {load} at the start; {os.cpu_count()} CPUs")
    rows: dict[str, list[dict]] = {}
    every = []
    for r in range(args.rounds):
        for label, workspace, file, function, names in RUNS:
            if args.only and args.only not in label:
                continue
            before = {n: independent(workspace, file, n) for n in names}
            docs = {d["function"]["name"]: d for d in tool(workspace, file, function)}
            after = {n: independent(workspace, file, n) for n in names}
            for n in names:
                f = figures_of(docs[n])
                ind = (before[n] + after[n]) / 2
                drifted = max(before[n], after[n]) / min(before[n], after[n]) > 1 + DRIFT
                row = {"round": r, "case": n, "independent": [before[n], after[n]], "drifted": drifted, **f}
                every.append(row)
                rows.setdefault(n, []).append({**row, "ind": ind})
                print(
                    f"  round {r + 1} {n}: rec {f['rec']:.3f}{' =' if f['exact'] else ''}, "
                    f"fit {f['share']:.0%}, "
                    f"shown {f['shown']:.1f} µs, unfitted {f['unfitted']:.1f} µs, wall {f['wall']:.1f} µs, "
                    f"independent {before[n]:.1f}/{after[n]:.1f} µs{' (drifted)' if drifted else ''}"
                    f"{' flagged' if f['flagged'] else ''}",
                    flush=True,
                )
    with open("/proc/loadavg") as fh:
        load = " ".join(fh.read().split()[:3])
    print(f"load average {load} at the end")
    print(
        "| case | rounds (drifted) | independent wall | rec (median, range) | rec == wall exactly "
        "| fit share (median, max) | mostly fit | flagged | shown / independent | unfitted / independent "
        "| outside ±15%, unflagged |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for n, rs in rows.items():
        kept = [x for x in rs if not x["drifted"]]
        shares = [x["share"] for x in rs]
        missed = sum(1 for x in kept if abs(x["shown"] / x["ind"] - 1) > MARGIN and not x["flagged"])
        print(
            f"| {n} | {len(rs)} ({len(rs) - len(kept)}) | {statistics.median(x['ind'] for x in rs):.1f} µs "
            f"| {spread([x['rec'] for x in rs if x['rec'] is not None])} | {sum(x['exact'] for x in rs)} "
            f"| {statistics.median(shares):.0%}, {max(shares):.0%} "
            f"| {sum(s > MOSTLY for s in shares)} | {sum(x['flagged'] for x in rs)} "
            f"| {spread([x['shown'] / x['ind'] for x in kept])} "
            f"| {spread([x['unfitted'] / x['ind'] for x in kept])} "
            f"| {missed} of {len(kept)} |"
        )
    if args.rounds_json:
        Path(args.rounds_json).write_text(json.dumps(every, indent=1))


if __name__ == "__main__":
    main()

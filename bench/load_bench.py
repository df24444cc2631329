"""Benchmark: does the noise verdict tell the job's own processes from outside load, and
does a run under another job's load come out flagged with that load named?

Loads are started as another user's jobs are: in a session of their own (``setsid``),
outside the tool's process tree, and stopped by their own process group after each run:

* ``none``: nothing added (on a quiet host: the quiet case);
* ``spinner``: one CPU spinner (``while True: pass``);
* ``membw``: one memory-bandwidth job (numpy copying two 256 MiB arrays back and forth):
  it slows whatever shares the memory bus while leaving run-queue delay at zero.

Parts (each load, each round):

* ``ranks``: ``trainium-lens run -- torchrun --nproc-per-node 2 train.py`` (tests/data/
  scripts/tinylm): ``others_cores`` as it is now (outside the job) and as the old check
  counted it (``others_cores + job_cores``: the sibling rank and the launcher included),
  and the verdict;
* ``example``: README's main command (``trainium-lens profile examples/rmsnorm.py``), then
  each function's independent wall (``bench/independent_wall.py``, a fresh process, same
  load): the figure shown (ops + host) and the unfitted one against it, and whether the
  result is flagged (``noisy_measurement``, ``outside_load``, ``unreconciled``) with which
  evidence;
* ``nanogpt-forward``, ``nanogpt-step``: the same on nanoGPT's forward and training step
  (``tests/data/nanogpt/profile_gpt.py``), each profiled alone.

    .venv/bin/python bench/load_bench.py --rounds 3
    .venv/bin/python bench/load_bench.py --rounds 1 --loads none,membw --parts example
    .venv/bin/python bench/load_bench.py --rounds 2 --parts nanogpt-forward,nanogpt-step

Goal: ``ranks`` with ``none`` on a quiet 2-core host is not flagged and its others_cores
holds no sibling; with ``spinner`` it is flagged naming the load; every profiled figure
outside ±15 % of its independent wall is flagged, the load named.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
NANOGPT = ROOT / "tests" / "data" / "nanogpt"
LOADS = {
    "none": None,
    "spinner": "while True:\n    pass\n",
    "membw": "import numpy as np\na = np.ones(2**25)\nb = np.empty_like(a)\n"
    "while True:\n    np.copyto(b, a)\n    np.copyto(a, b)\n",
}
FLAGS = ("noisy_measurement", "outside_load", "unreconciled", "shared_cores")
MARGIN = 0.15


def start_load(name: str) -> subprocess.Popen | None:
    code = LOADS[name]
    if code is None:
        return None
    proc = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    time.sleep(1.0)  # running, its arrays touched
    return proc


def stop_load(proc: subprocess.Popen | None) -> None:
    if proc is not None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def env() -> dict:
    return {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}


def verdict(doc: dict) -> list[str]:
    return [f"{f['kind']}: {f['message'][:160]}" for f in doc["findings"] if f["kind"] in FLAGS]


def ranks(tmp: Path) -> dict:
    ws = tmp / "proj"
    if not ws.exists():
        shutil.copytree(ROOT / "tests" / "data" / "scripts", ws)
        subprocess.run(["git", "init", "-q", str(ws)], check=True)
    out = tmp / "ranks.json"
    out.unlink(missing_ok=True)
    cmd = [str(BIN / "trainium-lens"), "run", "--steps", "3:4", "--no-store", "--json", str(out), "--"]
    cmd += ["torchrun", "--nproc-per-node", "2", "train.py", "--steps", "12"]
    subprocess.run(cmd, cwd=ws / "tinylm", env=env(), capture_output=True, timeout=600)
    if not out.exists():
        return {"error": "no result"}
    doc = json.loads(out.read_text())
    st = doc["stability"]
    old = None if st.get("others_cores") is None else st["others_cores"] + (st.get("job_cores") or 0.0)
    return {
        "others_cores": st.get("others_cores"),
        "old_others_cores": round(old, 3) if old is not None else None,
        "job_cores": st.get("job_cores"),
        "cpu_pressure_some": st.get("cpu_pressure_some"),
        "verdict": verdict(doc),
    }


# part -> (workspace, file, the function profiled (None: all, as README runs it), inputs)
CASES = {
    "example": (ROOT, "examples/rmsnorm.py", None, "make_inputs"),
    "nanogpt-forward": (NANOGPT, "profile_gpt.py", "forward", "make_batch"),
    "nanogpt-step": (NANOGPT, "profile_gpt.py", "train_step", "make_batch"),
}


def profiled(tmp: Path, part: str) -> list[dict]:
    """README's main command on one case, then each function's independent wall under the
    same load: the figure shown (ops + host, as the table prints it) and the unfitted one
    (``fit.unfitted_us``: what the fit to the wall did not touch) against it."""
    workspace, file, function, inputs = CASES[part]
    out = tmp / f"{part}.json"
    out.unlink(missing_ok=True)
    cmd = [str(BIN / "trainium-lens"), "profile", file, *([function] if function else [])]
    cmd += ["--workspace", str(workspace), "--no-store", "--json", str(out)]
    subprocess.run(cmd, cwd=workspace, env=env(), capture_output=True, timeout=900)
    if not out.exists():
        return [{"error": "no result"}]
    docs = json.loads(out.read_text())
    rows = []
    for doc in docs if isinstance(docs, list) else [docs]:
        name = doc["function"]["name"]
        timer = subprocess.run(
            [sys.executable, str(ROOT / "bench" / "independent_wall.py"), file, name, inputs]
            + ["--root", str(workspace), "--calls", "300" if function is None else "100"],
            cwd=workspace,
            env=env(),
            capture_output=True,
            text=True,
            timeout=600,
        )
        last = timer.stdout.strip().splitlines()[-1:] if timer.returncode == 0 else []
        independent = json.loads(last[0])["median_us"] if last else None  # the model prints first
        t, st = doc["totals"], doc["stability"]
        shown = t["self_time_us"] + (t.get("host_time_us") or 0.0)
        unfitted = (doc.get("fit") or {}).get("unfitted_us", shown)
        ratio = shown / independent if independent else None
        flags = verdict(doc)
        rows.append(
            {
                "function": name,
                "shown_us": round(shown, 2),
                "unfitted_us": round(unfitted, 2),
                "independent_us": round(independent, 2) if independent else None,
                "wall_us": t.get("wall_us_median"),  # the tool's own unprofiled wall
                "ratio": round(ratio, 3) if ratio else None,
                "unfitted_ratio": round(unfitted / independent, 3) if independent else None,
                "off": ratio is not None and abs(ratio - 1) > MARGIN,
                "flagged": any(f.split(":")[0] in FLAGS[:3] for f in flags),
                "others_cores": st.get("others_cores"),
                "outside_top": st.get("outside_top"),
                "verdict": flags,
            }
        )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--loads", default="none,spinner,membw")
    ap.add_argument("--parts", default="ranks,example")
    ap.add_argument("--out", help="also append each record as a JSON line here")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="load-bench-") as tmp_dir:
        tmp = Path(tmp_dir)
        for r in range(args.rounds):
            for load in args.loads.split(","):  # interleaved: the host's own load falls on all alike
                for part in args.parts.split(","):
                    loadavg = Path("/proc/loadavg").read_text().split()[0]
                    proc = start_load(load)
                    try:
                        got = ranks(tmp) if part == "ranks" else profiled(tmp, part)
                    finally:
                        stop_load(proc)
                    record = {"round": r, "load": load, "part": part, "loadavg_before": loadavg, "got": got}
                    print(json.dumps(record), flush=True)
                    if args.out:
                        with open(args.out, "a", encoding="utf-8") as fh:
                            fh.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    main()

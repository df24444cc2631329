"""Core-side speed: what the local target adds after a run, and the run store.

    OMP_NUM_THREADS=1 .venv/bin/python bench/core_bench.py [--repeat 3] [--results 200]

1. Teardown: seconds from the harness's ``result`` event to ``LocalTarget.run``
   returning (the batch is on disk; a reaper thread gives the harness
   ``stream.TEARDOWN_GRACE_S`` to exit, then stops its group), against the
   same run's time until the harness is gone (the baseline: what a caller
   waited when the target reaped before returning).
2. Store: ``RunStore.load_all`` over N stored results (copies of a real
   RMSNorm result), a fresh store (parses every file) against a warm one
   (mtime cache), and ``get`` by prefix.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "server"))

from trainium_lens.model.job import make_job  # noqa: E402
from trainium_lens.model.result import Batch  # noqa: E402
from trainium_lens.model.store import RunStore  # noqa: E402
from trainium_lens.targets import stream  # noqa: E402
from trainium_lens.targets.local import LocalTarget  # noqa: E402


def teardown(ws: Path, repeat: int) -> None:
    shutil.copy(ROOT / "examples" / "rmsnorm.py", ws / "rmsnorm.py")
    proto = {"wait": 0, "warmup": 1, "active": 1, "timing_calls": 1}
    handed, gone = [], []
    document = None
    for _ in range(repeat):
        seen: dict[str, float] = {}

        def on_event(event: dict) -> None:
            if event.get("event") == "result":
                seen["result"] = time.perf_counter()

        job = make_job(ws / "rmsnorm.py", functions=["rms_norm_naive"], protocol=proto, workspace=ws)
        document = LocalTarget().run(job, on_event)
        handed.append(time.perf_counter() - seen["result"])
        # The reaper lets the harness exit (or stops its group after the grace):
        # until then is what a caller waited before the hand-off.
        for thread in threading.enumerate():
            if thread.name == "harness-reaper":
                thread.join()
        gone.append(time.perf_counter() - seen["result"])
    base, ours = statistics.median(gone), statistics.median(handed)
    grace = stream.TEARDOWN_GRACE_S
    print("| after the result event | median s | runs | vs baseline |")
    print("| --- | ---: | ---: | ---: |")
    print(
        f"| baseline: until the harness is gone (exit, or its group stopped after "
        f"{grace:g} s) | {base:.3f} | {repeat} | 1.00x |"
    )
    print(
        f"| until `LocalTarget.run` returns (reaper thread does the rest) | {ours:.3f} | "
        f"{repeat} | {ours / base:.3f}x |"
    )
    return document


def store(ws: Path, document: dict, n: int) -> None:
    (result,) = Batch.from_dict(document).results
    runs = RunStore(ws / "store", history=n + 1)
    for i in range(n):
        result.run_id = f"20261129-000000-{i:04x}-0"
        result.created_at = f"2026-11-29T00:{i // 60:02d}:{i % 60:02d}Z"
        runs.save(result)
    size = sum(p.stat().st_size for p in runs.runs.glob("*.json")) / n

    def timed(fn, rounds=5):
        out = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t0)
        return statistics.median(out) * 1000

    cold = timed(lambda: RunStore(ws / "store").load_all())
    warm_store = RunStore(ws / "store")
    warm_store.load_all()
    warm = timed(warm_store.load_all)
    prefix = timed(lambda: warm_store.get("20261129-000000-00a0"))
    print()
    print(f"| store, {n} results of {size / 1024:.1f} KiB | median ms | vs cold |")
    print("| --- | ---: | ---: |")
    print(f"| baseline: load_all, fresh store (parses all) | {cold:.1f} | 1.00x |")
    print(f"| load_all, warm store (mtime cache) | {warm:.1f} | {warm / cold:.2f}x |")
    print(f"| get by prefix, warm store | {prefix:.1f} | {prefix / cold:.2f}x |")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--results", type=int, default=200)
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["TRAINIUM_LENS_CACHE"] = str(Path(tmp) / "cache")
        ws = Path(tmp) / "ws"
        ws.mkdir()
        document = teardown(ws, args.repeat)
        store(ws, document, args.results)


if __name__ == "__main__":
    main()

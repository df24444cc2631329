"""Server side of the timeline: a 100,000-event trace read, parsed into lanes,
and turned into the panel's payload (``trainiumLens/timeline``), against reading
the same file with ``json.load`` alone (the floor any reader pays).

    .venv/bin/python bench/timeline_bench.py [--events 100000] [--runs 5]

The trace is torch-shaped (cpu_op ranges named ``file(LINE): fn`` around ATen
ops nested three deep, ProfilerStep ranges) and synthetic: a real CPU profile
of that size takes minutes to make and holds the same kinds of events.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from trainium_lens.lsp.features.timeline import payload
from trainium_lens.model.result import FunctionRef, Result, Totals
from trainium_lens.traces.chrome import load_trace
from trainium_lens.traces.export import to_chrome_trace


def synth(total: int) -> dict:
    ev = []
    t = 5_000_000_000.0
    k = 0
    step = 0
    while len(ev) + 6 <= total:
        if k % 500 == 0:
            ev.append(
                {
                    "ph": "X",
                    "cat": "user_annotation",
                    "name": f"ProfilerStep#{step}",
                    "pid": 1,
                    "tid": 1,
                    "ts": t,
                    "dur": 500 * 45.0,
                }
            )
            step += 1
        line = 10 + k % 20
        ev.append(
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": f"model.py({line}): block",
                "pid": 1,
                "tid": 1,
                "ts": t + 1,
                "dur": 40.0,
            }
        )
        for d, (off, dur) in enumerate(((2, 30.0), (3, 20.0), (4, 5.0))):
            ev.append(
                {
                    "ph": "X",
                    "cat": "cpu_op",
                    "name": f"aten::op{(k + d) % 25}",
                    "pid": 1,
                    "tid": 1,
                    "ts": t + off,
                    "dur": dur,
                    "args": {"External id": k * 4 + d},
                }
            )
        ev.append(
            {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": t + 33, "dur": 6.0}
        )
        t += 45
        k += 1
    return {"traceEvents": ev, "displayTimeUnit": "ms"}


def timed(fn, runs: int) -> tuple[float, object]:
    """Median CPU time (ms): single-threaded work, steadier than wall time on
    the shared, loaded machine these figures come from."""
    out, times = None, []
    for _ in range(runs):
        t0 = time.process_time()
        out = fn()
        times.append((time.process_time() - t0) * 1000)
    return statistics.median(times), out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    result = Result(
        run_id="bench-0",
        created_at="",
        backend="cpu",
        clock="cpu",
        host="local",
        function=FunctionRef(file="model.py", name="block", line=1),
        totals=Totals(0.0, 0.0, None, 1),
    )
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.json"
        path.write_text(json.dumps(synth(args.events)))
        size = path.stat().st_size
        base, _ = timed(lambda: json.loads(path.read_bytes()), args.runs)
        parse, trace = timed(lambda: load_trace(path), args.runs)
        build, data = timed(lambda: payload(trace, result, "model.py", 15), args.runs)
        encode, text = timed(lambda: json.dumps(data, separators=(",", ":")), args.runs)
        export, _ = timed(lambda: json.dumps(to_chrome_trace(trace)), args.runs)
    n = len(trace.events)
    print(f"timeline server side: {n} events, trace {size / 1e6:.1f} MB, CPU ms, median of {args.runs}")
    print(f"  baseline json.load of the trace      {base:8.1f} ms  1.00x")
    print(f"  load_trace (read + lanes + lines)    {parse:8.1f} ms  {parse / base:.2f}x")
    print(f"  payload (compact columns)            {build:8.1f} ms  {build / base:.2f}x")
    print(f"  payload to JSON ({len(text) / 1e6:.1f} MB)            {encode:8.1f} ms  {encode / base:.2f}x")
    print(
        f"  first request total (parse+payload+JSON) {parse + build + encode:6.1f} ms  "
        f"{(parse + build + encode) / base:.2f}x; later requests reuse the parsed trace: "
        f"{build + encode:.1f} ms"
    )
    print(f"  export to Chrome-trace JSON          {export:8.1f} ms  {export / base:.2f}x")


if __name__ == "__main__":
    main()

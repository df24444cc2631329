"""The xla run's Chrome trace: what the timeline and ``export`` read."""

from __future__ import annotations

import json
from typing import Any

from trainium_lens.harness.labels import PHASE_KEY, SOURCE_KEY, format_label, source_ref


def write_trace(path: str, att: Any, cap: Any) -> str | None:
    """A Chrome trace: the executed instructions (tagged with their line, and
    ``Phase`` ``backward`` for the backward ones) and one user-line range per
    credited forward execution, both on the profiler clock (µs)."""
    events: list[dict] = [
        {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "user lines"}},
        {"ph": "M", "name": "process_name", "pid": 2, "tid": 0, "args": {"name": "HLO instructions"}},
    ]
    threads: dict[str, int] = {}
    for ex in cap.executed:
        credit = att.credits.get((ex.hlo_module, ex.hlo_op))
        args: dict[str, Any] = {"hlo_module": ex.hlo_module, "hlo_op": ex.hlo_op}
        if credit is not None and credit.stack:
            file, line, function = credit.stack[0]
            args[SOURCE_KEY] = source_ref(file, line)
        if credit is not None and credit.stack and credit.phase == "backward":
            args[PHASE_KEY] = "backward"
        elif credit is not None and credit.stack:
            events.append(
                {
                    "ph": "X",
                    "cat": "user_annotation",
                    "name": format_label(file, line, function),
                    "pid": 1,
                    "tid": 1,
                    "ts": ex.start_ns / 1000.0,
                    "dur": (ex.end_ns - ex.start_ns) / 1000.0,
                }
            )
        tid = threads.setdefault(ex.thread, len(threads) + 1)
        events.append(
            {
                "ph": "X",
                "cat": "device",
                "name": ex.hlo_op,
                "pid": 2,
                "tid": tid,
                "ts": ex.start_ns / 1000.0,
                "dur": (ex.end_ns - ex.start_ns) / 1000.0,
                "args": args,
            }
        )
    for thread, tid in threads.items():
        events.append({"ph": "M", "name": "thread_name", "pid": 2, "tid": tid, "args": {"name": thread}})
    # an asynchronous instruction's contraction, run untraced on the intra-op pool and
    # counted in its line's time (xla/async_work.py): one lane, so the timeline and an
    # independent sum over the trace hold what the lines hold
    pool = len(threads) + 1
    pool_name = "intra-op pool (an asynchronous instruction's untraced work)"
    events.append({"ph": "M", "name": "thread_name", "pid": 2, "tid": pool, "args": {"name": pool_name}})
    for op, (start, end) in getattr(att, "pool_work", []):
        events.append(
            {
                "ph": "X",
                "cat": "device",
                "name": f"{op} (pool work)",
                "pid": 2,
                "tid": pool,
                "ts": start / 1000.0,
                "dur": (end - start) / 1000.0,
                "args": {"hlo_op": op, "pool_work": True},
            }
        )
    try:
        with open(path, "w", encoding="utf-8") as fh:
            json.dump({"traceEvents": events, "displayTimeUnit": "ns"}, fh)
    except OSError:
        return None
    return path

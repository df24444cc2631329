"""A run's trace for Perfetto UI / chrome://tracing (``trainium-lens export``).

The reader (``chrome.py``) turns the harness's trace into lanes; this module turns
them back into one Chrome trace document with named process/thread lanes (the
command writes it through the one writer, ``cli/outputs.py``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from trainium_lens.traces.chrome import Trace


def to_chrome_trace(trace: Trace, title: str = "Trainium Lens run", other: dict | None = None) -> dict:
    """A Chrome-trace document that Perfetto UI and chrome://tracing open.

    Host lanes become threads of one process named ``title``; device lanes
    threads of a "Device" process, in the order the built-in timeline draws
    them. Times stay in the trace clock, so the result's ``timeline`` windows
    point at the same instants here.
    """
    out: list[dict] = []
    host_pid, device_pid = 1, 2
    out.append(_meta("process_name", host_pid, 0, {"name": title}))
    out.append(_meta("process_sort_index", host_pid, 0, {"sort_index": 0}))
    if any(lane.kind == "device" for lane in trace.lanes):
        out.append(_meta("process_name", device_pid, 0, {"name": "Device"}))
        out.append(_meta("process_sort_index", device_pid, 0, {"sort_index": 1}))
    where = []
    for i, lane in enumerate(trace.lanes):
        pid = device_pid if lane.kind == "device" else host_pid
        tid = i + 1
        where.append((pid, tid))
        out.append(_meta("thread_name", pid, tid, {"name": lane.name}))
        out.append(_meta("thread_sort_index", pid, tid, {"sort_index": i}))
    for ev in trace.events:
        pid, tid = where[ev.lane]
        args = {k: v for k, v in ev.args.items() if _plain(v)}
        if ev.line is not None:
            args["source"] = f"{ev.line[0]}:{ev.line[1]}"
        if ev.phase is not None:
            args["phase"] = ev.phase
        out.append(
            {
                "ph": "X",
                "name": ev.name,
                "cat": ev.cat or trace.lanes[ev.lane].kind,
                "ts": round(ev.start, 3),
                "dur": round(ev.dur, 3),
                "pid": pid,
                "tid": tid,
                "args": args,
            }
        )
    doc: dict[str, Any] = {"traceEvents": out, "displayTimeUnit": "ns"}
    other_data = {"producer": "trainium-lens"}
    if trace.meta.get("baseTimeNanoseconds") is not None:
        other_data["baseTimeNanoseconds"] = trace.meta["baseTimeNanoseconds"]
    other_data.update(other or {})
    doc["otherData"] = other_data
    return doc


def _meta(name: str, pid: int, tid: int, args: dict) -> dict:
    return {"ph": "M", "name": name, "pid": pid, "tid": tid, "ts": 0, "args": args}


def _plain(value: Any) -> bool:
    return (
        isinstance(value, (str, int, float, bool))
        or value is None
        or (isinstance(value, list) and all(isinstance(v, (str, int, float)) for v in value))
    )


def summarize(trace: Trace) -> Iterable[str]:
    """One line per lane: name and event count (for the CLI)."""
    counts = [0] * len(trace.lanes)
    for ev in trace.events:
        counts[ev.lane] += 1
    for lane, n in zip(trace.lanes, counts, strict=True):
        yield f"{lane.name}: {n} events"

"""Read a run's torch trace into lanes, (``export.py`` writes it for Perfetto UI).

The harness writes torch's Chrome trace with one ``record_function`` range per
user line, named ``<relpath>(<LINE>): <function>`` (the form Neuron Explorer
links to source). This module is the one reader of that file: the built-in
timeline (``lsp/features/timeline.py``) and ``trainium-lens export`` both go through
``parse_trace``, so they agree on what a lane is and which line an event
belongs to.

Lanes, per source thread or device stream:

* ``lines``  – the user-line ranges (what the editor's heat is made of);
* ``steps``  – ``ProfilerStep#N`` ranges;
* ``ops``    – ATen ops (and other framework ranges such as compiled regions);
* ``python`` – Python frames (only present when the run recorded stacks);
* ``runtime``– host-side runtime calls (``cudaLaunchKernel`` ...);
* ``device`` – kernels, copies and other device activity, where present.

Every event gets the user line it belongs to when that can be known: a line
range is its own line (``harness/labels.py`` is the one definition of their
names); an op carries the line the harness's attribution gave it
(``harness/attribution/trace_tags.py``: ``Source line``, and ``Phase`` for backward and
recompute ops, whose line is the forward line that caused them — the
unlabelled CPU twin steps included); a device event takes the line of the op
that launched it (``External id``). Traces written before the harness tagged
ops fall back to the innermost line range containing the op on its thread.
"""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import dataclass, field
from operator import attrgetter, itemgetter
from pathlib import Path
from typing import Any

from trainium_lens.errors import LensError
from trainium_lens.harness.labels import PHASE_KEY, SOURCE_KEY, parse_label

STEP_RE = re.compile(r"^ProfilerStep#\d+$")

DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation", "privateuse1_runtime", "device"}
RUNTIME_CATS = {"cuda_runtime", "cuda_driver", "privateuse1_driver", "runtime"}
SKIP_CATS = {"Trace"}  # the profiler's own span around the whole recording

KIND_ORDER = {"lines": 0, "steps": 1, "ops": 2, "python": 3, "runtime": 4, "device": 5, "other": 6}
KIND_TITLE = {
    "lines": "User lines",
    "steps": "Steps",
    "ops": "ATen ops",
    "python": "Python",
    "runtime": "Runtime",
    "device": "Device",
    "other": "Other",
}


class TraceError(LensError):
    """A trace file that cannot be read; the message says why in one line."""


@dataclass
class Lane:
    kind: str
    name: str
    source: tuple[Any, Any]  # the (pid, tid) of the original trace
    rows: int = 1  # nesting depth drawn as rows


@dataclass(slots=True)
class Event:
    lane: int
    start: float  # µs, trace clock (the file's ``ts``)
    dur: float  # µs
    name: str
    cat: str
    line: tuple[str, int] | None = None  # the user line it belongs to
    depth: int = 0  # nesting level inside its lane
    args: dict = field(default_factory=dict)
    phase: str | None = None  # "backward" / "recompute" (line: the forward line); None: forward


@dataclass
class Trace:
    lanes: list[Lane]
    events: list[Event]  # sorted by lane, then start
    t0: float  # first event start (µs, trace clock)
    t1: float  # last event end
    meta: dict = field(default_factory=dict)  # top-level fields of the file

    def line_events(self, file: str, line: int) -> list[Event]:
        return [e for e in self.events if e.line == (file, line)]

    def line_ranges(self) -> list[Event]:
        return [e for e in self.events if self.lanes[e.lane].kind == "lines"]


# -- reading ------------------------------------------------------------------


def read_trace_json(path: str | Path) -> dict:
    """The trace file as a dict (plain or gzipped JSON)."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise TraceError(f"cannot read trace {path}: {exc.strerror or exc}") from None
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except OSError as exc:
            raise TraceError(f"{path}: broken gzip ({exc})") from None
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise TraceError(f"{path}: not valid JSON ({exc})") from None
    if isinstance(data, list):  # the bare-array form of the Chrome trace format
        data = {"traceEvents": data}
    if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list):
        raise TraceError(f"{path}: not a Chrome trace (no traceEvents list)")
    return data


def load_trace(path: str | Path) -> Trace:
    return parse_trace(read_trace_json(path))


def _classify(cat: str, name: str, pid: Any, cpu_pids: set) -> str | None:
    if cat in SKIP_CATS:
        return None
    if cat in ("user_annotation", "cpu_op") and parse_label(name) is not None:
        # The harness's ranges (``_RecordFunctionFast``) are exported as cpu_op.
        return "lines"
    if cat == "user_annotation":
        if STEP_RE.match(name):
            return "steps"
        return "ops"  # other record_function ranges: compiled regions, user labels
    if cat == "cpu_op":
        return "ops"
    if cat == "python_function":
        return "python"
    if cat in RUNTIME_CATS:
        return "runtime"
    if cat in DEVICE_CATS or pid not in cpu_pids:
        return "device"
    return "other"


def parse_trace(data: dict) -> Trace:
    """Lanes and events of a torch Chrome trace (see the module docstring).

    Written for 100,000-event traces: one pass over the events, the
    classification cached per (category, name, pid) (names repeat: a run has
    a few dozen distinct ops and lines), sorts on plain attributes.
    """
    names: dict[tuple[Any, Any, Any], str] = {}
    complete = []
    cpu_pids = set()
    number = (int, float)
    for e in data.get("traceEvents", []):
        if not isinstance(e, dict):
            continue
        ph = e.get("ph")
        if ph == "M":
            if isinstance(e.get("args"), dict):
                names[(e.get("name"), e.get("pid"), e.get("tid"))] = str(e["args"].get("name", ""))
            continue
        if ph != "X":
            continue
        ts, dur = e.get("ts"), e.get("dur", 0)
        if ts.__class__ not in number:  # also refuses bool
            continue
        if dur.__class__ not in number or dur < 0:
            dur = 0
        cat = e.get("cat")
        if cat in ("cpu_op", "user_annotation", "python_function"):
            cpu_pids.add(e.get("pid"))
        complete.append((e, float(ts), float(dur)))

    lane_ids: dict[tuple[str, Any, Any], int] = {}
    lanes: list[Lane] = []
    events: list[Event] = []
    kinds: dict[tuple, tuple[str | None, tuple[str, int] | None]] = {}
    append = events.append
    for e, ts, dur in complete:
        cat = str(e.get("cat") or "")
        name = str(e.get("name") or "")
        pid, tid = e.get("pid"), e.get("tid")
        ck = (cat, name, pid)
        known = kinds.get(ck)
        if known is None:
            kind = _classify(cat, name, pid, cpu_pids)
            line = None
            if kind == "lines":
                parsed = parse_label(name)
                line = (parsed[0], parsed[1]) if parsed else None
            known = kinds[ck] = (kind, line)
        kind, line = known
        if kind is None:
            continue
        key = (kind, pid, tid)
        lane = lane_ids.get(key)
        if lane is None:
            lane = lane_ids[key] = len(lanes)
            lanes.append(Lane(kind, "", (pid, tid)))
        args = e.get("args")
        append(Event(lane, ts, dur, name, cat, line, 0, args if isinstance(args, dict) else {}))

    _attribute_lines(lanes, events)
    order = _name_lanes(lanes, names)
    remap = {old: new for new, old in enumerate(order)}
    lanes = [lanes[i] for i in order]
    for ev in events:
        ev.lane = remap[ev.lane]
    # (lane, start, longest first) with two stable C-speed sorts.
    events.sort(key=attrgetter("dur"), reverse=True)
    events.sort(key=attrgetter("lane", "start"))
    _nest(lanes, events)
    t0 = min((ev.start for ev in events), default=0.0)
    t1 = max((ev.start + ev.dur for ev in events), default=0.0)
    meta = {k: v for k, v in data.items() if k != "traceEvents"}
    return Trace(lanes, events, t0, t1, meta)


def _source(ref: Any, refs: dict) -> tuple[str, int] | None:
    line = refs.get(ref)
    if line is None and isinstance(ref, str):
        file, _, num = ref.rpartition(":")
        line = refs[ref] = (file, int(num)) if file and num.isdigit() else None
    return line


def _attribute_lines(lanes: list[Lane], events: list[Event]) -> None:
    """Ops take the line the harness tagged them with (so do an xla run's HLO
    instructions, device events the harness tags itself); other device events the
    line of the op that launched them. (Untagged traces: see ``_contained_lines``.)"""
    kind_of = [lane.kind for lane in lanes]
    refs: dict[str, tuple[str, int] | None] = {}
    launched: dict[Any, tuple[str, int]] = {}
    tagged = False
    for ev in events:
        if kind_of[ev.lane] in ("ops", "device") and ev.args:
            ref = ev.args.get(SOURCE_KEY)
            if ref is None:
                continue
            tagged = True
            ev.line = _source(ref, refs)
            phase = ev.args.get(PHASE_KEY)
            ev.phase = phase if isinstance(phase, str) else None
            if ev.line is not None:
                for key in ("External id", "correlation"):
                    if key in ev.args:
                        launched.setdefault((key, ev.args[key]), ev.line)
    if not tagged:
        launched = _contained_lines(lanes, events)
    if not launched:
        return
    for ev in events:
        if kind_of[ev.lane] == "device":
            for key in ("External id", "correlation"):
                found = launched.get((key, ev.args.get(key)))
                if found is not None:
                    ev.line = found
                    break


def _contained_lines(lanes: list[Lane], events: list[Event]) -> dict:
    """Traces written before the harness tagged its ops: an op takes the innermost
    line range open when it began on its thread (no backward, no twin steps)."""
    kind_of = [lane.kind for lane in lanes]
    source_of = [lane.source for lane in lanes]
    by_thread: dict[tuple, list[tuple[float, bool, float, int, Event]]] = {}
    for ev in events:
        kind = kind_of[ev.lane]
        if kind in ("lines", "ops", "runtime"):
            # Line ranges before ops that start at the same instant, outer before inner.
            by_thread.setdefault(source_of[ev.lane], []).append(
                (ev.start, kind != "lines", -ev.dur, id(ev), ev)
            )
    launched: dict[Any, tuple[str, int]] = {}
    for items in by_thread.values():
        items.sort(key=itemgetter(0, 1, 2, 3))
        stack: list[Event] = []
        for start, is_op, _d, _i, ev in items:
            while stack and stack[-1].start + stack[-1].dur < start:
                stack.pop()
            if not is_op:
                stack.append(ev)
                continue
            if not stack:
                continue
            # The innermost range open when the op began. (Not "that holds the
            # whole op": the file's µs are rounded to 3 decimals, so an op's end
            # can pass its range's end by a nanosecond.)
            ev.line = stack[-1].line
            if ev.line is not None and ev.args:
                for key in ("External id", "correlation"):
                    if key in ev.args:
                        launched.setdefault((key, ev.args[key]), ev.line)
    return launched


def _name_lanes(lanes: list[Lane], names: dict) -> list[int]:
    """Readable lane names; returns the drawing order (kind, then source)."""
    threads_per_kind: dict[str, set] = {}
    for lane in lanes:
        threads_per_kind.setdefault(lane.kind, set()).add(lane.source)
    for lane in lanes:
        pid, tid = lane.source
        title = KIND_TITLE[lane.kind]
        if lane.kind == "device":
            proc = names.get(("process_name", pid, 0)) or names.get(("process_name", pid, tid))
            thread = names.get(("thread_name", pid, tid)) or f"stream {tid}"
            lane.name = f"{proc or f'Device {pid}'} · {thread}"
        elif len(threads_per_kind[lane.kind]) > 1:
            lane.name = f"{title} · thread {tid}"
        else:
            lane.name = title
    return sorted(range(len(lanes)), key=lambda i: (KIND_ORDER[lanes[i].kind], str(lanes[i].source)))


def _nest(lanes: list[Lane], events: list[Event]) -> None:
    """Depth of each event in its lane (events sorted by lane, start, -dur)."""
    stack: list[float] = []  # end times of the open ancestors
    lane = -1
    for ev in events:
        if ev.lane != lane:
            lane, stack = ev.lane, []
        while stack and stack[-1] <= ev.start:
            stack.pop()
        ev.depth = len(stack)
        lanes[lane].rows = max(lanes[lane].rows, ev.depth + 1)
        stack.append(ev.start + ev.dur)

"""Read what torch_xla's profiler wrote, with the standard library only.

``torch_xla.debug.profiler.stop_trace()`` exports ``<log_dir>/plugins/profile/
<run>/<host>.xplane.pb`` (an ``XSpace`` protobuf). It holds both halves of the
join the xla backend needs (docs/xla.md, "Time per HLO instruction"):

* on the ``/host:CPU`` plane, one event per executed HLO instruction or fusion,
  with stats ``hlo_op`` (the optimized instruction's name), ``hlo_module`` and
  ``program_id``;
* on the ``/host:metadata`` plane, one event metadata per compiled program,
  keyed by program id, whose stat ``hlo_proto`` is the **optimized** ``HloProto``
  (fusion names are the ones that ran), with the stack-frame index.

No protobuf library is available on a target (the harness needs torch and
torch_xla only), so this decodes the wire format for the few fields it reads;
field numbers are those of tsl's ``xplane.proto`` and xla's ``hlo.proto`` /
``xla_data.proto`` (``OpMetadata.stack_frame_id`` = 15).
"""

from __future__ import annotations

import glob
import os
import struct
from dataclasses import dataclass, field

from trainium_lens.harness.xla.hlo import HloModule, parse_hlo_proto
from trainium_lens.harness.xla.protobuf import fields, signed, text

# The name of the ``xp.Trace`` scope around each measured step (its number follows):
# the steps' start times come from these markers
STEP_MARKER = "trainium-lens step "

# -- protobuf wire format -------------------------------------------------------------


# -- HLO ----------------------------------------------------------------------------------


# -- XSpace ----------------------------------------------------------------------------


@dataclass
class Executed:
    """One executed HLO instruction (or fusion) on the host CPU clock."""

    start_ns: float
    end_ns: float
    hlo_op: str
    hlo_module: str
    program_id: int | None
    thread: str


@dataclass
class Capture:
    executed: list[Executed] = field(default_factory=list)
    modules: dict[int, HloModule] = field(default_factory=dict)  # program id -> optimized HLO
    markers: list[tuple[str, float, float]] = field(default_factory=list)  # (name, start, end) ns
    path: str = ""
    # the CPU runtime's own events (xla/async_work.py): "end: <op>" when an instruction's
    # work completed, per op name (ns, sorted); the thread pool's task regions and the
    # thunk executor's spans, per thread
    ends: dict[str, list[float]] = field(default_factory=dict)
    regions: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    executors: dict[str, list[tuple[float, float]]] = field(default_factory=dict)


def _stat_value(buf: bytes, names: dict[int, str]) -> tuple[int, int | float | str | bytes | None]:
    """(stat metadata id, value); a ``ref_value`` (7) is an interned string: a stat
    metadata id whose name is the value."""
    mid = 0
    value: int | float | str | bytes | None = None
    for number, v in fields(buf):
        if number == 1 and isinstance(v, int):
            mid = v
        elif number == 3 and isinstance(v, int):
            value = v
        elif number == 7 and isinstance(v, int):
            value = names.get(v, "")
        elif number == 4 and isinstance(v, int):
            value = signed(v)
        elif number == 2 and isinstance(v, int):
            value = struct.unpack("<d", v.to_bytes(8, "little"))[0]
        elif number == 5:
            value = text(v)
        elif number == 6:
            value = v
    return mid, value


def _map_entries(buf: bytes) -> tuple[int, bytes]:
    key, val = 0, b""
    for number, v in fields(buf):
        if number == 1 and isinstance(v, int):
            key = v
        elif number == 2 and isinstance(v, bytes):
            val = v
    return key, val


def _named(buf: bytes) -> tuple[int, str, list[bytes]]:
    ident, name, stats = 0, "", []
    for number, v in fields(buf):
        if number == 1 and isinstance(v, int):
            ident = v
        elif number == 2:
            name = text(v)
        elif number == 5 and isinstance(v, bytes):
            stats.append(v)
    return ident, name, stats


def read_xspace(path: str, marker_prefix: str) -> Capture:
    with open(path, "rb") as fh:
        space = fh.read()
    cap = Capture(path=path)
    for number, plane in fields(space):
        if number != 1 or not isinstance(plane, bytes):
            continue
        _read_plane(plane, cap, marker_prefix)
    return cap


def _read_plane(plane: bytes, cap: Capture, marker_prefix: str) -> None:
    parts = fields(plane)
    name = next((text(v) for n, v in parts if n == 2), "")
    if name not in ("/host:CPU", "/host:metadata"):
        return
    stat_names: dict[int, str] = {}
    event_meta: dict[int, tuple[str, list[bytes]]] = {}
    for n, v in parts:
        if n == 5 and isinstance(v, bytes):
            key, val = _map_entries(v)
            stat_names[key] = _named(val)[1]
        elif n == 4 and isinstance(v, bytes):
            key, val = _map_entries(v)
            _ident, ev_name, stats = _named(val)
            event_meta[key] = (ev_name, stats)
    if name == "/host:metadata":
        for key, (_ev_name, stats) in event_meta.items():
            for raw in stats:
                mid, value = _stat_value(raw, stat_names)
                if stat_names.get(mid) in ("hlo_proto", "Hlo Proto") and isinstance(value, bytes):
                    cap.modules[key] = parse_hlo_proto(value)
        return
    for n, line in parts:
        if n != 3 or not isinstance(line, bytes):
            continue
        _read_line(line, cap, stat_names, event_meta, marker_prefix)


def _read_line(
    line: bytes,
    cap: Capture,
    stat_names: dict[int, str],
    event_meta: dict[int, tuple[str, list[bytes]]],
    marker_prefix: str,
) -> None:
    base_ns, thread, events = 0, "", []
    marks: list[tuple[float, bool]] = []
    decoded: dict[int, dict[str, object]] = {}
    for n, v in fields(line):
        if n == 3 and isinstance(v, int):
            base_ns = signed(v)
        elif n == 2:
            thread = text(v)
        elif n == 4 and isinstance(v, bytes):
            events.append(v)
    for raw in events:
        mid = offset_ps = duration_ps = 0
        stats: dict[str, object] = {}
        for n, v in fields(raw):
            if n == 1 and isinstance(v, int):
                mid = v
            elif n == 2 and isinstance(v, int):
                offset_ps = v
            elif n == 3 and isinstance(v, int):
                duration_ps = v
            elif n == 4 and isinstance(v, bytes):
                sid, value = _stat_value(v, stat_names)
                stats[stat_names.get(sid, "")] = value
        ev_name, meta_stats = event_meta.get(mid, ("", []))
        shared = decoded.get(mid)
        if shared is None:  # stats stored once on the event's metadata, decoded once
            shared = decoded[mid] = {}
            for raw_stat in meta_stats:
                sid, value = _stat_value(raw_stat, stat_names)
                shared[stat_names.get(sid, "")] = value
        for k, shared_value in shared.items():
            stats.setdefault(k, shared_value)
        start = base_ns + offset_ps / 1000.0
        end = start + duration_ps / 1000.0
        if "hlo_op" in stats:
            pid = stats.get("program_id")
            cap.executed.append(
                Executed(
                    start,
                    end,
                    str(stats["hlo_op"]),
                    str(stats.get("hlo_module", "")),
                    pid if isinstance(pid, int) else None,
                    thread,
                )
            )
        elif ev_name.startswith(marker_prefix):
            cap.markers.append((ev_name, start, end))
        else:
            _runtime_event(cap, thread, ev_name, start, end, marks)
    for k in cap.ends:
        cap.ends[k].sort()
    opened: float | None = None
    for at, stop in sorted(marks):  # a region is a start and the next stop on this thread
        if not stop:
            opened = at
        elif opened is not None:
            cap.regions.setdefault(thread, []).append((opened, at))
            opened = None


# the CPU runtime's events that say where untraced work ran (xla/async_work.py)
END_PREFIX = "end: "
REGION_START, REGION_STOP = "ThreadpoolListener::StartRegion", "ThreadpoolListener::StopRegion"
EXECUTOR = "ThunkExecutor::Execute"


def _runtime_event(
    cap: Capture, thread: str, name: str, start: float, end: float, marks: list[tuple[float, bool]]
) -> None:
    """``marks``: this thread's task region starts (False) and stops (True), paired once sorted."""
    if name.startswith(END_PREFIX):
        cap.ends.setdefault(name[len(END_PREFIX) :], []).append(start)
    elif name in (REGION_START, REGION_STOP):
        marks.append((start, name == REGION_STOP))
    elif name == EXECUTOR:
        cap.executors.setdefault(thread, []).append((start, end))


def find_xplanes(log_dir: str) -> list[str]:
    return sorted(glob.glob(os.path.join(log_dir, "plugins", "profile", "*", "*.xplane.pb")))

"""Tag every op event of the exported Chrome trace with the line it is attributed to.

The attribution pass knows each measured event's line (``event_lines``, keyed
by the event id the trace calls ``External id``), the unlabelled CPU twin steps
included (their ops take their labelled partner's line). Readers of the trace
(the built-in timeline, ``trainium-lens export``) use these tags instead of
re-attributing ops themselves:

* ``Source line``: ``file:line`` the op's time counts on (for a backward op:
  the forward line that caused it);
* ``Phase``: ``backward`` / ``recompute`` (absent: forward);
* ``Torch thread`` (backend neuron): PyTorch's own thread counter for the op
  (``FunctionEvent.thread``, 1 for the first thread), which torch's trace does not
  write (its ``tid`` is the OS thread): TorchNeuron's op map keys executions by it
  (traces/neuron_join.py).
"""

from __future__ import annotations

import json
import os
from typing import Any

from trainium_lens.harness.attribution.kinds import FWD, PHASES
from trainium_lens.harness.events import write_json_atomic
from trainium_lens.harness.labels import PHASE_KEY, SOURCE_KEY, THREAD_KEY, source_ref


def export_tagged(prof: Any, path: str, att: Any, labels: dict, threads: bool = False) -> None:
    """torch's Chrome trace of ``prof`` at ``path``, tagged; on any failure (a full
    disk in the middle of torch's own write, or of the tagging's) nothing is left at
    ``path``: half a trace that no result names would only take the disk. ``threads``:
    tag ``Torch thread`` too (TorchNeuron's join needs it; reading it costs about as
    much as torch's own export, 0.7 s per 100k events, so only where it is used)."""
    try:
        prof.export_chrome_trace(path)
        tag_trace(path, att, labels, torch_threads(prof) if threads else None)
    except BaseException:
        try:
            os.unlink(path)
        except OSError:
            pass
        raise


def torch_threads(prof: Any) -> dict[int, int]:
    """External id -> PyTorch's thread counter, from the raw events (cheap: no
    ``FunctionEvent`` is built). Empty where this torch does not expose them."""
    try:
        return {e.correlation_id(): e.start_thread_id() for e in prof.profiler.kineto_results.events()}
    except (AttributeError, RuntimeError, TypeError):
        return {}


def tag_trace(path: str, att: Any, labels: dict, threads: dict[int, int] | None = None) -> int:
    """Rewrite ``path`` in place (atomically); returns the number of events tagged."""
    event_lines = att.event_lines
    if not event_lines:
        return 0
    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
    refs: dict[Any, str | None] = {}
    seen: dict[Any, tuple[Any, Any]] = {}  # External id -> (name, its tag) of tagged events
    tagged = 0
    for ev in data.get("traceEvents", ()):
        if not isinstance(ev, dict) or ev.get("ph") != "X":
            continue
        args = ev.get("args")
        if not isinstance(args, dict) or ev.get("cat") not in ("cpu_op", "user_annotation"):
            continue
        xid = args.get("External id")
        found = event_lines.get(xid)
        if found is None and isinstance(xid, int):
            # torch's events() drops an op nested directly in an op of the same name
            # (``aten::div_`` in ``aten::div_``): it takes its parent's line
            parent = seen.get(xid - 1)
            if parent is not None and parent[0] == ev.get("name"):
                found = parent[1]
        if found is None:
            continue
        seen[xid] = (ev.get("name"), found)
        if threads and xid in threads:
            args[THREAD_KEY] = threads[xid]
        key, phase = found
        if key not in refs:
            refs[key] = source_ref(*labels[key][:2]) if key in labels else None
        ref = refs[key]
        if ref is not None:
            args[SOURCE_KEY] = ref
            tagged += 1
        if phase != FWD:
            args[PHASE_KEY] = PHASES[phase]
    # torch's own trace as it was (NaN allowed); a full disk leaves no temporary file
    write_json_atomic(path, data, compact=True, allow_nan=True)
    return tagged

"""One calibration for every run on this host, where ``$TRAINIUM_LENS_CALIBRATION``
names a file to keep it in (a test suite, a batch of runs on one host).

The calibration (``calibrate.py``) costs ~0.8 s of CPU per run, and a suite that
starts a few hundred harness runs pays it a few hundred times, each measured under
whatever else the machine runs at that moment. With the variable set, a run reads the
calibration its key matches (host, torch, Python, backend, profiler settings) from the
file; when none matches, or the stored one was measured while other processes used
half a core or more, it measures its own and stores it for the next runs. The result
says which (``calibration.source``). Without the variable every run measures its own,
as before: the figures of one run never depend on a file the user did not name.

``scripts/test.sh`` measures it once while nothing else runs, beside the CPU roof
(``TRAINIUM_LENS_ROOF``, the same idea for the roofline).
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from typing import Any

from trainium_lens.harness.eager.calibrate import calibrate, start_profiler
from trainium_lens.harness.events import write_json_atomic
from trainium_lens.harness.runtime.host import HostWindow, load_cores

ENV = "TRAINIUM_LENS_CALIBRATION"
BUSY_CORES = 0.5  # other processes' CPU while measuring: such a calibration is not reused


def key(torch: Any, backend: str, activities: list, kwargs: dict) -> str:
    """What the profiler's cost per event depends on: the host, the torch and Python
    that run it, and the profiler's settings (their names: an experimental config's
    repr holds its address)."""
    acts = ",".join(sorted(str(a) for a in activities))
    return (
        f"{platform.node()}|torch {torch.__version__}|python {sys.version_info[0]}.{sys.version_info[1]}"
        f"|{backend}|{acts}|{','.join(sorted(kwargs))}"
    )


def _read(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return {}
    entries = data.get("entries") if isinstance(data, dict) else None
    return entries if isinstance(entries, dict) else {}


def for_run(torch: Any, backend: Any, ctx: Any, run_dir: str, events: Any) -> dict:
    """The ``calibrate`` stage of a cpu-clock run, for both the eager and the script
    protocols: its progress line, the profiler settings the run's steps use (``ctx``:
    what ``measure.profiler_kwargs`` reads of a run), the calibration."""
    from trainium_lens.harness.eager import measure

    shared = " (shared file)" if os.environ.get(ENV) else ""
    events.stage("calibrate", None, f"the profiler's cost per op event{shared}")
    kwargs = measure.profiler_kwargs(ctx, run_dir, "calibration")
    return shared_or_measured(torch, backend.name, backend.activities(), kwargs)


def _store(path: str, k: str, cal: dict, others: float | None, **extra: Any) -> None:
    """``cal`` as the entry for ``k``; OSError when the file cannot be written."""
    entries = _read(path)
    entries[k] = {
        "calibration": {n: v for n, v in cal.items() if n != "profiler_start_s"},
        "others_cores": 1.0 if others is None else others,
        "measured": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        **extra,
    }
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    write_json_atomic(path, {"entries": entries}, indent=1)


def shared_or_measured(torch: Any, backend: str, activities: list, kwargs: dict) -> dict:
    """The calibration of this run: the stored one where ``$TRAINIUM_LENS_CALIBRATION``
    holds one for this key (measured quiet), else this run's own, stored for the next
    runs when the variable is set."""
    path = os.environ.get(ENV)
    if not path:
        return {**calibrate(torch, activities, kwargs), "source": "measured"}
    k = key(torch, backend, activities, kwargs)
    stored = _read(path).get(k)
    if isinstance(stored, dict) and stored.get("others_cores", 1.0) < BUSY_CORES:
        cal = stored.get("calibration")
        if isinstance(cal, dict) and isinstance(cal.get("per_depth_us"), (int, float)):
            # the profiler's first start is still paid here, before any function is measured
            start_s = start_profiler(torch, activities, kwargs)
            return {
                **cal,
                "cost_s": 0.0,
                "profiler_start_s": round(start_s, 3),
                "source": f"shared: {path}, measured {stored.get('measured', '?')}",
            }
    window = HostWindow().start()
    cal = calibrate(torch, activities, kwargs)
    others = load_cores(window.stop())
    busy = others is None or others >= BUSY_CORES
    try:  # a read-only or vanished folder: this run keeps its own, nothing is stored
        _store(path, k, cal, others)
    except OSError:
        pass
    return {
        **cal,
        "source": "measured (busy host: not shared)" if busy else "measured (shared with later runs)",
    }


def main() -> int:
    """``python -m trainium_lens.harness.eager.calibration_store``: the cpu backend's
    calibration, measured now into ``$TRAINIUM_LENS_CALIBRATION`` (scripts/test.sh,
    while nothing else runs), with the profiler settings every cpu run uses."""
    from types import SimpleNamespace

    import torch

    from trainium_lens.harness.eager import measure
    from trainium_lens.harness.eager.backends import CpuBackend

    if not os.environ.get(ENV):
        print(f"{ENV} is not set: nothing to store", file=sys.stderr)
        return 2
    path = os.environ[ENV]
    run = SimpleNamespace(backend=CpuBackend(torch))  # what measure.profiler_kwargs reads of a run
    activities = run.backend.activities()
    kwargs = measure.profiler_kwargs(run, os.path.dirname(os.path.abspath(path)), "calibration")
    k = key(torch, run.backend.name, activities, kwargs)
    # three readings, the median kept: every run of the suite shares this one, so one
    # reading's noise (0.08-0.25 µs per level across runs here) would be in all of them
    window = HostWindow().start()
    readings = sorted(
        (calibrate(torch, activities, kwargs) for _ in range(3)), key=lambda c: c["per_depth_us"]
    )
    others = load_cores(window.stop())
    cal = readings[1]
    try:
        _store(path, k, cal, others, readings_per_depth_us=[c["per_depth_us"] for c in readings])
    except OSError as exc:
        print(f"cannot write {path}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    print(
        f"calibration: {cal['per_depth_us']} µs per op event per nesting level (the median of "
        f"{', '.join(str(c['per_depth_us']) for c in readings)}), other processes {others} cores"
        + (": busy, not shared" if others is None or others >= BUSY_CORES else "")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

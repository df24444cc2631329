"""An independent wall for one marked function, without trainium-lens: import the
file as plain Python, build its inputs, warm up, then time ``--calls`` calls one by
one with ``time.perf_counter`` and print the median (µs) as JSON. Run it in a fresh
process: nothing of the harness (profiler, hooks, labelling mode) is loaded.

    .venv/bin/python bench/independent_wall.py examples/rmsnorm.py rms_norm_naive make_inputs
    PJRT_DEVICE=CPU .venv-xla/bin/python bench/independent_wall.py \
        tests/data/nanogpt/profile_gpt.py train_step make_batch --root . --xla --calls 30
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch


def load(root: Path, file: str) -> Any:
    """``src/pkg/mod.py`` in a package is imported as ``pkg.mod`` (relative imports)."""
    path = (root / file).resolve()
    parts = [path.stem]
    parent = path.parent
    while (parent / "__init__.py").exists():
        parts.insert(0, parent.name)
        parent = parent.parent
    sys.path.insert(0, str(parent))
    return importlib.import_module(".".join(parts))


def call_args(value: object) -> tuple[tuple, dict]:
    if isinstance(value, dict):
        return (), value
    if isinstance(value, tuple):
        return value, {}
    return (value,), {}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("function")
    ap.add_argument("inputs")
    ap.add_argument("--root", default=".")
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--warm-s", type=float, default=1.0)
    ap.add_argument("--xla", action="store_true", help="on torch-xla's device, each call synced")
    args = ap.parse_args()
    mod = load(Path(args.root), args.file)
    torch.manual_seed(0)
    make = getattr(mod, args.inputs)
    wants_device = "device" in inspect.signature(make).parameters
    device = torch.device("cpu")
    sync: Any = None
    if args.xla:  # as a torch-xla user times a step: the graph runs at the sync
        import torch_xla
        import torch_xla.core.xla_model as xm

        device = torch_xla.device()

        def sync() -> None:
            torch_xla.sync()
            xm.wait_device_ops()

    a, kw = call_args(make(device) if wants_device else make())
    fn: Any = mod
    for part in args.function.split("."):
        fn = getattr(fn, part)
    if "." in args.function:  # a method of a class built by the inputs function: not used here
        raise SystemExit("methods are not supported")
    end = time.perf_counter() + args.warm_s
    warm = 0
    while time.perf_counter() < end or warm < 5:
        out = fn(*a, **kw)
        if sync is not None:
            sync()
        warm += 1
    times = []
    for _ in range(args.calls):
        t0 = time.perf_counter()
        out = fn(*a, **kw)  # held until the sync: a lazy tensor nobody holds is never computed
        if sync is not None:
            sync()
        times.append((time.perf_counter() - t0) * 1e6)
        del out
    print(json.dumps({"median_us": statistics.median(times), "calls": len(times), "warm_calls": warm}))


if __name__ == "__main__":
    main()

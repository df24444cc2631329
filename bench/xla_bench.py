"""Backend xla: cost of reading the torch_xla capture, beside a baseline.

Run with the torch-xla venv: ``.venv-xla/bin/python bench/xla_bench.py``.
Captures 5 steps of a 4-layer transformer encoder (batch 8 × 128 tokens × 256)
on torch-xla's CPU device, then times, in this process, alternating:

* ours: ``xla/xplane.read_xspace`` (pure-Python protobuf decode of the xplane,
  executed instructions + optimized HLO) + ``xla/attribution.attribute`` + ``figures``;
* baseline: ``json.load`` of the same capture's ``trace.json.gz`` (what any
  reader of the profiler's Chrome trace pays, without the HLO).
"""

from __future__ import annotations

import glob
import gzip
import json
import os
import statistics
import sys
import tempfile
import time

os.environ.update(XLA_IR_DEBUG="1", XLA_HLO_DEBUG="1", PJRT_DEVICE="CPU")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "server"))

import torch  # noqa: E402
import torch_xla  # noqa: E402
import torch_xla.core.xla_model as xm  # noqa: E402
import torch_xla.debug.profiler as xp  # noqa: E402

from trainium_lens.harness.xla.attribution import attribute, figures  # noqa: E402
from trainium_lens.harness.xla.xplane import find_xplanes, read_xspace  # noqa: E402

MARK = "bench step "


def capture(log_dir: str) -> None:
    dev = torch_xla.device()
    layer = torch.nn.TransformerEncoderLayer(256, 8, 512, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, 4).eval().to(dev)
    x = torch.randn(8, 128, 256).to(dev)
    with torch.no_grad():
        for _ in range(2):
            out = model(x)
            torch_xla.sync()
            xm.wait_device_ops()
        xp.start_trace(log_dir)
        for i in range(5):
            with xp.Trace(f"{MARK}{i}"):
                out = model(x)
            torch_xla.sync()
            xm.wait_device_ops()
        xp.stop_trace()
    del out


def main() -> None:
    log_dir = tempfile.mkdtemp(prefix="xla-bench-")
    capture(log_dir)
    plane = find_xplanes(log_dir)[-1]
    chrome = glob.glob(os.path.join(os.path.dirname(plane), "*.trace.json.gz"))[0]

    def ours() -> int:
        cap = read_xspace(plane, MARK)
        starts = sorted(s for _n, s, _e in cap.markers)
        att = attribute(cap, starts, lambda f: "bench.py" if f.endswith("xla_bench.py") else None)
        figures(att, lambda f, n: "")
        return len(cap.executed)

    def baseline() -> int:
        with gzip.open(chrome) as fh:
            return len(json.load(fh)["traceEvents"])

    a, b = [], []
    for _ in range(7):
        t = time.perf_counter()
        n_ours = ours()
        a.append(time.perf_counter() - t)
        t = time.perf_counter()
        n_base = baseline()
        b.append(time.perf_counter() - t)
    ratios = sorted(x / y for x, y in zip(a, b, strict=True))
    print(
        f"xplane {os.path.getsize(plane) / 1e6:.2f} MB, {n_ours} executed instructions; "
        f"chrome trace {os.path.getsize(chrome) / 1e6:.2f} MB gz, {n_base} events"
    )
    print(
        f"ours (decode + attribute): median {statistics.median(a) * 1e3:.1f} ms; "
        f"baseline (json.load of trace.json.gz): median {statistics.median(b) * 1e3:.1f} ms"
    )
    print(
        f"ratio ours/baseline: min {ratios[0]:.2f} median {statistics.median(ratios):.2f} "
        f"max {ratios[-1]:.2f}"
    )


if __name__ == "__main__":
    main()

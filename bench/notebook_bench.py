"""Benchmark: ``%%trainium_lens`` on a training-step cell in a real kernel (nbclient),
against a plain ``time.perf_counter`` timing of the same cell body in the same kernel,
timed just before and just after the magic (their mean cancels a steady drift).

    .venv/bin/python bench/notebook_bench.py [--rounds 3]

Prints per round: the cell's profiled figure per call (ops + host, the result's
reconciliation) and its unprofiled wall median, each over the plain median; and the
magic's own cost: the magic cell's whole time over (plain median × the runs it made).

Then the same for a cell that loops over its own steps (the body in a ``for`` of
``LOOP_STEPS``, run once, steps 3..5 profiled as ``run`` does): its figure per step
and its unprofiled reference steps' median against a ``perf_counter`` median of the
same loop's steps run plain in the same kernel (steps 6.. of a plain run of the same
loop, before and after), and the magic cell's whole time over the plain loop's; and,
the same steps' ``thread_time`` median beside (both cases): their wall over it is how
much a loaded host's waits for a CPU inflate a wall timing (the profiler's op times are
wall intervals too; a one-step cell's protocol keeps the steps no thread waited in,
a loop cell's three steps cannot be chosen).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "server"))
sys.path.insert(0, str(ROOT))

import nbformat  # noqa: E402
from jupyter_client.kernelspec import KernelSpecManager  # noqa: E402
from jupyter_client.manager import KernelManager  # noqa: E402
from nbclient import NotebookClient  # noqa: E402

from trainium_lens.model.store import RunStore  # noqa: E402

SETUP = """\
import time, statistics, torch
from torch import nn
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 256))
x, y = torch.randn(64, 256), torch.randn(64, 256)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)"""
BODY = """\
out = model(x)
loss = ((out - y) ** 2).mean()
opt.zero_grad()
loss.backward()
opt.step()"""
PLAIN = f"""\
_code = compile({BODY!r}, "<plain>", "exec")
for _ in range(30):
    exec(_code)
_t, _c = [], []
for _ in range(400):
    _s, _sc = time.perf_counter(), time.thread_time()
    exec(_code)
    _t.append(time.perf_counter() - _s); _c.append(time.thread_time() - _sc)
print("PLAIN", statistics.median(_t) * 1e6, statistics.median(_c) * 1e6)"""
LOOP_STEPS = 40
LOOP = f"for _i in range({LOOP_STEPS}):\n" + "".join(f"    {ln}\n" for ln in BODY.splitlines())
PLAIN_LOOP = f"""\
_t, _c, _w = [], [], time.perf_counter()
for _i in range({LOOP_STEPS}):
    _s, _sc = time.perf_counter(), time.thread_time()
{"".join(f"    {ln}{chr(10)}" for ln in BODY.splitlines())}    _t.append(time.perf_counter() - _s)
    _c.append(time.thread_time() - _sc)
_w = time.perf_counter() - _w
print("LOOPPLAIN", statistics.median(_t[5:]) * 1e6, _w * 1e6, statistics.median(_c[5:]) * 1e6)"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="nb-bench-"))
    work, kernels = root / "work", root / "kernels" / "lens"
    work.mkdir()
    kernels.mkdir(parents=True)
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "lens",
        "language": "python",
        "env": {
            "PYTHONPATH": str(ROOT / "server"),
            "TRAINIUM_LENS_CACHE": str(root / "cache"),
            "OMP_NUM_THREADS": "1",  # one intra-op thread: a busy host's OpenMP barriers are not the cell
        },
    }
    (kernels / "kernel.json").write_text(json.dumps(spec), encoding="utf-8")
    cells = ["%load_ext trainium_lens", SETUP]
    for _ in range(args.rounds):
        cells += [
            PLAIN,
            "_t0 = time.perf_counter()",
            "%%trainium_lens\n" + BODY,
            'print("WHOLE", (time.perf_counter() - _t0) * 1e6)',
            PLAIN,
            PLAIN_LOOP,
            "_t0 = time.perf_counter()",
            "%%trainium_lens --steps 3:5\n" + LOOP,
            'print("LOOPWHOLE", (time.perf_counter() - _t0) * 1e6)',
            PLAIN_LOOP,
        ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    km = KernelManager(
        kernel_name="lens", kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(root / "kernels")])
    )
    NotebookClient(nb, km=km, timeout=900, resources={"metadata": {"path": str(work)}}).execute()
    # what each cell printed, and the magic's table (displayed, its plain-text form)
    text = [
        "".join(o.get("text", "") + o.get("data", {}).get("text/plain", "") for o in c.outputs)
        for c in nb.cells
    ]
    found = [m for t in text for m in re.findall(r"(?m)^PLAIN ([\d.]+) ([\d.]+)", t)]
    plain = [float(w) for w, _ in found]
    plain_cpu = [float(c) for _, c in found]
    whole = [float(m) for t in text for m in re.findall(r"WHOLE ([\d.]+)", t)]
    calls = [int(m) for t in text for m in re.findall(r"the cell ran (\d+) times", t)]
    everything = sorted(RunStore(work).load_all(), key=lambda r: r.run_id)
    results = [r for r in everything if r.script is None]
    print(
        "round  plain µs (before/after)  profiled/plain  wall/plain  runs  magic whole / (plain × runs)  "
        "plain wall/cpu  profiled/plain cpu"
    )
    for i, r in enumerate(results):
        before, after = plain[2 * i], plain[2 * i + 1]
        base = (before + after) / 2
        base_cpu = (plain_cpu[2 * i] + plain_cpu[2 * i + 1]) / 2
        rec = r.reconciliation
        print(
            f"{i + 1:5}  {before:8.1f} / {after:8.1f}     {rec.profiled_us / base:13.3f}  "
            f"{rec.reference_us / base:10.3f}  {calls[i]:4}  {whole[i] / (base * calls[i]):28.2f}  "
            f"{base / base_cpu:14.2f}  {rec.profiled_us / base_cpu:18.3f}"
        )
    print(
        "median profiled/plain",
        round(
            statistics.median(
                r.reconciliation.profiled_us / ((plain[2 * i] + plain[2 * i + 1]) / 2)
                for i, r in enumerate(results)
            ),
            3,
        ),
    )
    loop_report(text, [r for r in everything if r.script is not None])


def loop_report(text: list[str], results: list) -> None:
    """The loop cell's rounds: figure per step and reference against the plain loop's steps."""
    found = [m for t in text for m in re.findall(r"LOOPPLAIN ([\d.]+) ([\d.]+) ([\d.]+)", t)]
    plain = [(float(a), float(b)) for a, b, _ in found]
    cpu = [float(c) for _, _, c in found]  # the thread's CPU time per step: what the cpu clock measures
    whole = [float(m) for t in text for m in re.findall(r"LOOPWHOLE ([\d.]+)", t)]
    print(f"\nloop cell ({LOOP_STEPS} steps, run once, steps 3..5 profiled)")
    print(
        "round  plain step µs (before/after)  profiled/plain  reference/plain  magic whole / plain loop  "
        "plain wall/cpu  profiled/plain cpu"
    )
    ratios: list[float] = []
    cpu_ratios: list[float] = []
    for i, r in enumerate(results):
        (before, loop_before), (after, loop_after) = plain[2 * i], plain[2 * i + 1]
        base = (before + after) / 2
        rec = r.reconciliation
        ratios.append(rec.profiled_us / base)
        base_cpu = (cpu[2 * i] + cpu[2 * i + 1]) / 2
        cpu_ratios.append(rec.profiled_us / base_cpu)
        print(
            f"{i + 1:5}  {before:8.1f} / {after:8.1f}          {rec.profiled_us / base:13.3f}  "
            f"{rec.reference_us / base:15.3f}  {whole[i] / ((loop_before + loop_after) / 2):24.2f}  "
            f"{base / base_cpu:14.2f}  {cpu_ratios[-1]:18.3f}"
        )
    if ratios:
        print("median loop profiled/plain", round(statistics.median(ratios), 3))
        print("median loop profiled/plain cpu", round(statistics.median(cpu_ratios), 3))


if __name__ == "__main__":
    main()

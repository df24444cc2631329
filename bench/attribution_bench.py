"""Benchmark: building a result from a large CPU profile — our line attribution
against torch's own ``key_averages()`` on the same profile, side by side.

    OMP_NUM_THREADS=1 .venv/bin/python bench/attribution_bench.py [--ops 20000] [--repeat 5]
    OMP_NUM_THREADS=1 .venv/bin/python bench/attribution_bench.py --training [--ops 20000]

The workload (``many_small_ops``) dispatches >= 20,000 ATen ops per step from
a few user lines, labelled exactly as the harness labels them, each labelled
step followed by a plain one as on the harness's CPU path (ours includes
pairing the two: lines from one, CPU times from the other). Both sides start
from the same ``prof.events()`` (torch's parse, timed separately). Time: median
of ``--repeat`` runs, alternating; peak memory: tracemalloc, in a separate run.

``--training``: a training step instead (``deep_mlp_step``: forward through many
small layers, ``backward()``, a per-parameter SGD step), >= 20,000 op events
per step counting forward, backward and optimizer ops: our side includes
linking every backward node to its forward op and tagging every op event for
the exported trace, as the harness does.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "server"))

import torch  # noqa: E402

from trainium_lens.harness.attribution import build  # noqa: E402
from trainium_lens.harness.attribution.tree import attribute  # noqa: E402
from trainium_lens.harness.eager import run  # noqa: E402
from trainium_lens.harness.eager.lines import LineLabeler  # noqa: E402
from trainium_lens.harness.job.loader import UserCode  # noqa: E402


def many_small_ops(xs, ws):
    """A small MLP over many tiny tensors: 4 ATen dispatches per item."""
    out = []
    for x, w in zip(xs, ws, strict=True):
        h = x * w  # one aten::mul
        h = h + x  # one aten::add
        out.append(torch.relu(h))  # one aten::relu (+ its nested clamp on some builds)
    return torch.stack(out).sum()


def _profile_paired(fn, args: tuple, active: int) -> tuple:
    """As the harness does on CPU: each labelled step is followed by a plain one."""
    labeler = LineLabeler(UserCode(str(HERE)), run.invoke.__code__)
    sched = torch.profiler.schedule(wait=0, warmup=1, active=2 * active, repeat=1)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], schedule=sched) as prof:
        for step in range(1 + 2 * active):
            if step % 2:
                with labeler:
                    run.invoke(fn, args, {})
            else:
                run.invoke(fn, args, {})
            prof.step()
    return prof, labeler


def profile_workload(items: int, active: int) -> tuple:
    xs = [torch.randn(4) for _ in range(items)]
    ws = [torch.randn(4) for _ in range(items)]
    return _profile_paired(many_small_ops, (xs, ws), active)


def deep_mlp_step(layers, opt, x):
    """One training step through many tiny layers (a helper per layer)."""
    h = x
    for lin in layers:
        h = torch.tanh(lin(h))  # linear (addmm ...) and tanh; backward: mm x2, sum, tanh_backward
    loss = h.pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()  # foreach=False: add_ per parameter
    return loss


def profile_training(ops: int, active: int) -> tuple:
    n_layers = max(1, ops // 36)  # ~38 ATen op events per layer and step (forward, backward, step)
    layers = torch.nn.ModuleList([torch.nn.Linear(4, 4) for _ in range(n_layers)])
    opt = torch.optim.SGD(layers.parameters(), lr=1e-4, foreach=False)
    x = torch.randn(2, 4)
    return _profile_paired(deep_mlp_step, (layers, opt, x), active)


def ours(events, labels):
    att = attribute(
        events, labels, False, None, torch.autograd.DeviceType.CPU, paired=True, record_events=True
    )
    return att, build.lines_and_ops(att, labels, build.SourceText(str(HERE)))


def theirs(events):
    return events.key_averages()


def timed(fn, *args) -> float:
    t0 = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t0


def peak(fn, *args) -> int:
    tracemalloc.start()
    try:
        fn(*args)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", type=int, default=20000, help="ATen ops per step (about)")
    ap.add_argument("--active", type=int, default=2, help="labelled steps (as many plain)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--training", action="store_true", help="a training step (forward, backward, optimizer)")
    a = ap.parse_args()
    torch.set_num_threads(1)
    if a.training:
        prof, labeler = profile_training(a.ops, a.active)
    else:
        prof, labeler = profile_workload(a.ops // 3 + 1, a.active)
    t0 = time.perf_counter()
    events = prof.events()
    t_events = time.perf_counter() - t0
    ops_per_step = sum(1 for e in events if e.name.startswith("aten::")) / (2 * a.active)
    att, figures = ours(events, labeler.labels)
    # same op set and counts as key_averages (sanity, not timed); times come
    # from the plain steps only, so they differ from key_averages' mix of both
    assert att.paired_steps == a.active and att.mismatched_steps == 0
    ka = {e.key: e for e in theirs(events) if e.key.startswith("aten::")}
    mine = {o["name"]: o for o in figures["ops"]}
    assert set(ka) == set(mine), set(ka) ^ set(mine)
    for name, e in ka.items():
        assert abs(e.count / (2 * a.active) - mine[name]["calls"]) < 1e-9
    t_ours, t_theirs = [], []
    for _ in range(a.repeat):
        t_theirs.append(timed(theirs, events))
        t_ours.append(timed(ours, events, labeler.labels))
    m_theirs = peak(theirs, events)
    m_ours = peak(ours, events, labeler.labels)
    mo, mt = statistics.median(t_ours), statistics.median(t_theirs)
    print(
        f"profile: {len(events)} events, {ops_per_step:.0f} aten ops per step, "
        f"{a.active} labelled + {a.active} plain steps, {len(figures['lines'])} lines; "
        f"torch {torch.__version__}, "
        f"python {sys.version.split()[0]}, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}"
    )
    print(f"prof.events() (shared by both)   {t_events * 1e3:8.1f} ms")
    print(f"key_averages()                   {mt * 1e3:8.1f} ms   peak {m_theirs / 2**10:8.0f} KiB")
    print(f"line attribution + result        {mo * 1e3:8.1f} ms   peak {m_ours / 2**10:8.0f} KiB")
    print(f"ratio ours/key_averages: time {mo / mt:.2f}x, peak memory {m_ours / m_theirs:.2f}x")
    if a.training:
        t = figures
        print(
            f"backward nodes linked: {att.backward_nodes - att.unlinked_nodes} of {att.backward_nodes}; "
            f"per step forward {t['forward_time_us'] / 1e3:.1f} ms, backward "
            f"{t['backward_time_us'] / 1e3:.1f} ms, optimizer {t['optimizer_time_us'] / 1e3:.1f} ms"
        )


if __name__ == "__main__":
    main()

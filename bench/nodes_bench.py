"""A job across nodes (docs/nodes.md): what the second node costs.

    sudo scripts/lab-nodes.sh up
    .venv/bin/python bench/nodes_bench.py [--rounds 2]

In the two-node lab (scripts/lab-nodes.sh), the same marked function (2 ranks
per node, a matmul and an all_reduce) through ``runner.profile`` on a
``HostsTarget`` of one node (``node1``: 2 ranks) and of two (``node1,node2``:
4 ranks), rounds alternating. Per run:

* wall: ``runner.profile`` end to end (perf_counter around the call);
* gather: the nodes' batches read back over SSH (timed by re-reading each
  node's batch over that node's connection, as the run does when the batch
  did not come inline) and combined into one document (timed in the target);
* merge: ``model/ranks.merge_document`` on the combined document.

Per rank: gather and merge divided by the ranks. The lab's nodes share this
machine's cores: the harness times of two nodes compete (docs/lab.md).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "server"))

from trainium_lens.engine import runner  # noqa: E402
from trainium_lens.model.job import make_job  # noqa: E402
from trainium_lens.model.ranks import merge_document  # noqa: E402
from trainium_lens.targets.hosts import HostsTarget  # noqa: E402

CFG = Path.home() / ".cache/trainium-lens/lab/ssh_config"
PYTHON = str(ROOT / ".venv/bin/python")
SOURCE = """\
import torch
import torch.distributed as dist


def make():
    torch.manual_seed(0)
    return (torch.randn(256, 256),)


# trainium: profile inputs=make wait=0 warmup=1 active=5 timing_calls=3
def step(x):
    y = x @ x
    t = y.sum().reshape(1)
    dist.all_reduce(t)
    return t
"""


def one(ws: Path, hosts: list[str]) -> dict:
    target = HostsTarget(hosts, ssh_config=str(CFG), remote_python=PYTHON, ifname="lab0")
    captured: dict = {}
    run = target.run

    def keep(job, on_event, cancel=None, timeout=None):  # the combined document, for merge timing
        captured["doc"] = run(job, on_event, cancel, timeout)
        return captured["doc"]

    target.run = keep  # type: ignore[method-assign]
    try:
        job = make_job(str(ws / "job.py"), functions=["step"], workspace=str(ws), nproc=2)
        t0 = time.perf_counter()
        results = runner.profile(job, target, None, timeout=300)
        wall = time.perf_counter() - t0
        ranks = len(results[0].ranks)
        reads = []
        for node, rb_dir in zip(target.nodes, _batch_paths(captured["doc"], target), strict=True):
            r0 = time.perf_counter()
            node._read_json(rb_dir)
            reads.append(time.perf_counter() - r0)
        m0 = time.perf_counter()
        merge_document(captured["doc"])
        merge = time.perf_counter() - m0
        return {
            "ranks": ranks,
            "wall": wall,
            "read": sum(reads),
            "combine": target.timings.get("combine_s", 0.0),
            "merge": merge,
        }
    finally:
        target.close()


def _batch_paths(document: dict, target: HostsTarget) -> list[str]:
    """Each node's launcher batch (``<node run dir>/batch.json``)."""
    out = []
    for node in target.nodes:
        rb = next(r for r in document["rank_batches"] if f"node-{node.host}/" in r["run_dir"])
        out.append(str(Path(rb["run_dir"]).parent / "batch.json"))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    rows: dict[str, list[dict]] = {"1 node": [], "2 nodes": []}
    with tempfile.TemporaryDirectory(prefix="nodes-bench-") as tmp:
        ws = Path(tmp)
        (ws / "job.py").write_text(SOURCE)
        for _ in range(args.rounds):
            rows["1 node"].append(one(ws, ["node1"]))
            rows["2 nodes"].append(one(ws, ["node1", "node2"]))
    print("| job | ranks | wall s | read batches ms | combine ms | merge ms | gather+merge per rank ms |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, runs in rows.items():
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        per_rank = (med["read"] + med["combine"] + med["merge"]) / med["ranks"] * 1000
        print(
            f"| {name} | {med['ranks']:.0f} | {med['wall']:.1f} | "
            f"{med['read'] * 1000:.0f} | {med['combine'] * 1000:.2f} | {med['merge'] * 1000:.1f} | "
            f"{per_rank:.1f} |"
        )


if __name__ == "__main__":
    main()

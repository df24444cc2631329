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
from trainium_lens.targets.nodes.hosts import HostsTarget  # noqa: E402
from trainium_lens.targets.where import NodeOptions, Where  # noqa: E402

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
    where = Where(
        hosts=tuple(hosts), ssh_config=str(CFG), remote_python=PYTHON, node=NodeOptions(ifname="lab0")
    )
    target = HostsTarget(where)
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
            node.read_result(rb_dir)
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


SLOW = """\
import time

import torch
import torch.distributed as dist


def make():
    return (torch.ones(4),)


# trainium: profile inputs=make wait=0 warmup=0 active=60 timing_calls=1
def slow(x):
    time.sleep(1.0)
    t = x.sum().reshape(1)
    dist.all_reduce(t)
    return t
"""


def _job_procs() -> int:
    """Processes of a profile job in the lab's node namespaces."""
    import subprocess

    out = 0
    for ns in ("tlens-node1", "tlens-node2"):
        pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split()
        for pid in pids:
            try:
                if b"trainium_lens" in Path(f"/proc/{pid}/cmdline").read_bytes():
                    out += 1
            except OSError:
                pass
    return out


def _squeue() -> str:
    import subprocess

    return subprocess.run(
        ["ssh", "-F", str(CFG), "login", "squeue -h"], capture_output=True, text=True, timeout=30
    ).stdout.strip()


def fault(ws: Path, how: str) -> dict:
    """Seconds from the fault to the CLI's one-line error (or, for kill -9, to an
    empty squeue and no job process on either node)."""
    import subprocess

    where = ["--slurm", "login", "--nodes", "2"] if how == "kill9" else ["--hosts", "node1,node2"]
    log = ws / f"{how}.log"
    argv = [PYTHON, "-m", "trainium_lens", "profile", str(ws / "slow.py"), "slow", *where, "--nproc", "2",
            "--ssh-config", str(CFG), "--remote-python", PYTHON, "--ifname", "lab0", "--workspace", str(ws),
            "--no-store", "--pg-timeout", "30"]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=log.open("w"), stdin=subprocess.DEVNULL)
    while "calibrate" not in log.read_text():
        time.sleep(0.2)
    time.sleep(2)
    t0 = time.perf_counter()
    if how == "partition":
        subprocess.run(["ip", "-n", "tlens-node2", "link", "set", "lab0", "down"], check=True)
    elif how == "node_dies":
        for pid in subprocess.run(
            ["ip", "netns", "pids", "tlens-node2"], capture_output=True, text=True
        ).stdout.split():
            if Path(f"/proc/{pid}/cmdline").read_bytes() != b"sleep\0infinity\0":
                subprocess.run(["kill", "-9", pid])
    else:
        proc.kill()
    proc.wait()
    detected = time.perf_counter() - t0
    if how == "partition":
        subprocess.run(["ip", "-n", "tlens-node2", "link", "set", "lab0", "up"], check=True)
    while _job_procs() or (how == "kill9" and _squeue()):
        time.sleep(0.2)
    clean = time.perf_counter() - t0
    line = next((ln for ln in log.read_text().splitlines() if ln.startswith("trainium-lens:")), "")
    if how == "node_dies":
        subprocess.run(["bash", str(ROOT / "scripts/lab-nodes.sh"), "up"], capture_output=True, check=True)
    return {"fault": how, "detected_s": detected, "clean_s": clean, "line": line}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--faults", action="store_true", help="time fault detection and cleanup instead")
    args = ap.parse_args()
    if args.faults:
        with tempfile.TemporaryDirectory(prefix="nodes-bench-") as tmp:
            (Path(tmp) / "slow.py").write_text(SLOW)
            print("| fault | CLI ended after s | nothing left after s | the line |")
            print("| --- | ---: | ---: | --- |")
            for how in ("partition", "node_dies", "kill9"):
                r = fault(Path(tmp), how)
                print(f"| {how} | {r['detected_s']:.1f} | {r['clean_s']:.1f} | {r['line'][:150]} |")
        return
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

"""Remote (SSH) overhead, measured side by side with its baseline.

1. Tool overhead per run on a warm connection: ``profile --host`` minus the same
   job run locally (same machine, same Python: the difference is only what the
   SSH target adds), beside a raw ``ssh HOST true`` over the same master.
   Goal: ≤ 0.5 s.
2. Re-sync of a 1,000-file workspace after changing one file (what a run does
   before starting the harness: prepare + sync), beside a raw
   ``rsync -a`` of the same tree over the same master. Goal: ≤ 0.3 s on loopback.

Without ``--host`` it starts its own sshd on loopback (tests/sshd.py: needs
root and openssh-server, see scripts/setup-ssh.sh).

    OMP_NUM_THREADS=1 .venv/bin/python bench/ssh_bench.py [--repeat 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from trainium_lens.targets.ssh.target import SshTarget  # noqa: E402

SOURCE = """\
import torch


def make_inputs():
    return (torch.ones(8),)


# trainium: profile inputs=make_inputs
def tiny(x):
    return x + 1
"""
FAST = ["--wait", "0", "--warmup", "0", "--active", "1", "--timing-calls", "1", "--no-store"]


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def med(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} s"


def cli(*args: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "trainium_lens", "profile", *args, *FAST], capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise SystemExit(f"profile failed: {proc.stderr.strip()[-500:]}")


class _TimedPopen(subprocess.Popen):
    """Records when the local harness process was started."""

    started: list[float] = []

    def __init__(self, *args, **kwargs):
        _TimedPopen.started.append(time.perf_counter())
        super().__init__(*args, **kwargs)


def overhead(host: str, config: str, python: str, tmp: Path, repeat: int, repeat_cli: int) -> None:
    from trainium_lens.model.job import Job, make_job
    from trainium_lens.targets import stream
    from trainium_lens.targets.local import LocalTarget

    ws = tmp / "ws"
    ws.mkdir()
    (ws / "tiny.py").write_text(SOURCE)
    remote = [
        "--host",
        host,
        "--ssh-config",
        config,
        "--remote-python",
        python,
        "--work-dir",
        str(tmp / "work"),
    ]
    cli(str(ws / "tiny.py"), *remote)  # warm: master up, harness installed
    cli(str(ws / "tiny.py"))
    # (a) end to end through the CLI: what a user waits for (noisy: torch import
    #     dominates and varies by seconds on a loaded machine)
    local_t, remote_t = [], []
    for i in range(repeat_cli):
        pair = [("l", lambda: cli(str(ws / "tiny.py"))), ("r", lambda: cli(str(ws / "tiny.py"), *remote))]
        for kind, fn in pair if i % 2 == 0 else pair[::-1]:  # alternate: drift cancels
            (local_t if kind == "l" else remote_t).append(timed(fn))

    # (b) in process, each run minus the harness's own time from its start to its
    #     result event (measured on the host by the wrapper; locally from the
    #     subprocess start): what is left is what each target adds around it.
    def job() -> Job:
        return make_job(ws / "tiny.py", protocol={"wait": 0, "warmup": 0, "active": 1, "timing_calls": 1})

    target = SshTarget(host, ssh_config=config, remote_python=python, work_dir=str(tmp / "work"))
    local = LocalTarget(python=python)
    ssh_extra, local_extra = [], []
    for _ in range(repeat):
        total = timed(lambda: target.run(job(), lambda e: None))
        ssh_extra.append(total - target.last_harness_s)  # host: harness start → result
        _TimedPopen.started.clear()
        result_at: list[float] = []
        stream.subprocess.Popen = _TimedPopen
        try:
            total = timed(
                lambda: local.run(
                    job(),
                    lambda e: result_at.append(time.perf_counter()) if e.get("event") == "result" else None,
                )
            )
        finally:
            stream.subprocess.Popen = _ORIG_POPEN
        local_extra.append(total - (result_at[0] - _TimedPopen.started[0]))
    raw = [
        timed(lambda: subprocess.run(target.conn.argv() + ["true"], check=True, stdin=subprocess.DEVNULL))
        for _ in range(repeat * 2)
    ]
    steps = {"master check": [], "prepare (1 round trip)": [], "sync, no change (rsync)": []}
    for _ in range(repeat * 2):
        steps["master check"].append(timed(target.conn.master))
        info: dict = {}
        steps["prepare (1 round trip)"].append(timed(lambda: info.update(target.prepare(ws))))
        steps["sync, no change (rsync)"].append(timed(lambda: target.sync(ws, info, lambda e: None)))
    added = statistics.median(ssh_extra) - statistics.median(local_extra)
    print("\n### Tool overhead per run, warm connection\n")
    print("| measure | time |\n| --- | --- |")
    print(f"| `profile` local, end to end (baseline, median of {repeat_cli}) | {med(local_t)} |")
    print(f"| `profile --host` loopback, end to end (median of {repeat_cli}) | {med(remote_t)} |")
    print(
        f"| difference end to end (noisy: harness runs vary by seconds) | "
        f"{statistics.median(remote_t) - statistics.median(local_t):+.3f} s |"
    )
    print(f"| local target: run − harness start→result (median of {repeat}) | {med(local_extra)} |")
    print(f"| SSH target: run − harness start→result on the host (median of {repeat}) | {med(ssh_extra)} |")
    print(f"| **overhead of `--host`** (SSH − local, harness excluded) | **{added:+.3f} s** (goal ≤ 0.5 s) |")
    print(f"| raw `ssh HOST true` over the master (baseline) | {med(raw)} |")
    for name, values in steps.items():
        print(f"| … of which {name} | {med(values)} |")
    target.close()


_ORIG_POPEN = subprocess.Popen


def resync(host: str, config: str, python: str, tmp: Path, repeat: int) -> None:
    ws = tmp / "many"
    for i in range(1000):
        path = ws / f"pkg{i % 20:02d}" / f"mod{i:04d}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"VALUE = {i}\n" + "# padding\n" * 40)
    rows = []
    for mode in ("rsync", "tar"):
        target = SshTarget(
            host,
            ssh_config=config,
            remote_python=python,
            work_dir=str(tmp / f"work-{mode}"),
            use_rsync=mode == "rsync",
        )
        info = target.prepare(ws)
        first = timed(lambda: target.sync(ws, info, lambda e: None))
        both, alone = [], []
        for i in range(repeat):
            (ws / "pkg07" / "mod0007.py").write_text(f"VALUE = {i}  # changed\n")
            both.append(timed(lambda: target.sync(ws, target.prepare(ws), lambda e: None)))
            (ws / "pkg08" / "mod0008.py").write_text(f"VALUE = {i}  # changed\n")
            alone.append(timed(lambda: target.sync(ws, info, lambda e: None)))
        assert (
            tmp / f"work-{mode}" / "src" / "pkg08" / "mod0008.py"
        ).read_text() == f"VALUE = {repeat - 1}  # changed\n"
        rows.append((mode, first, both, alone))
        last = target
    raw_dst = tmp / "raw-rsync"
    shell = last.conn.rsync_shell()
    raw_cmd = ["rsync", "-a", "-s", "-e", shell, f"{ws}/", f"{host}:{raw_dst}/"]
    subprocess.run(raw_cmd, check=True)
    raw = []
    for i in range(repeat):
        (ws / "pkg09" / "mod0009.py").write_text(f"VALUE = {i}  # changed\n")
        raw.append(timed(lambda: subprocess.run(raw_cmd, check=True)))
    last.close()
    print("\n### Re-sync of 1,000 files, one changed (loopback)\n")
    print(
        "| transport | first sync | prepare + sync (what a run does) | sync alone |\n"
        "| --- | --- | --- | --- |"
    )
    for mode, first, both, alone in rows:
        # tar: "alone" reuses a stale manifest, so only prepare + sync means anything
        print(f"| {mode} | {first:.3f} s | {med(both)} | {med(alone) if mode == 'rsync' else '-'} |")
    print(f"| raw `rsync -a` of the tree (baseline) | | | {med(raw)} |")
    rsync_alone = statistics.median(rows[0][3])
    print(
        f"\nsync alone / raw rsync: {rsync_alone / statistics.median(raw):.2f}× "
        f"(goal for prepare + sync: ≤ 0.3 s)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host")
    parser.add_argument("--ssh-config")
    parser.add_argument("--remote-python", default=sys.executable)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--repeat-cli", type=int, default=3)
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    with tempfile.TemporaryDirectory(prefix="ssh-bench-") as name:
        tmp = Path(name)
        control = Path("/tmp") / f"tl-bench-{os.getpid()}"
        control.mkdir(mode=0o700)
        os.environ["TRAINIUM_LENS_SSH_CONTROL_DIR"] = str(control)
        server = None
        host, config = args.host, args.ssh_config
        if not host:
            from tests.support.sshd import start_loopback_sshd

            server = start_loopback_sshd(tmp / "sshd")
            host, config = "lens-test", str(server.config)
        try:
            print(f"host {host}; remote python {args.remote_python}; repeat {args.repeat}")
            resync(host, config, args.remote_python, tmp, args.repeat)
            overhead(host, config, args.remote_python, tmp, args.repeat, args.repeat_cli)
        finally:
            if server:
                server.stop()
            subprocess.run(["rm", "-rf", str(control)])


if __name__ == "__main__":
    main()

"""Warm worker: command → result of ``trainiumLens.profile``, cold beside warm.

Two real language servers (pytest-lsp client ⇄ ``python -m trainium_lens.lsp``)
in one session, each on its own copy of the workspace: one with
``warmWorker.idleSeconds = 0`` (every run starts ``python -m trainium_lens.harness``:
the baseline) and one with the warm worker (default settings). Their runs
alternate, cold then warm, so both see the same machine load. The warm server's
first run (it starts the worker) is reported on its own.

Functions: ``rms_norm_naive`` (examples/rmsnorm.py) and ``gpt_forward``
(bench/models/tiny_gpt.py, a 2-layer GPT-style decoder). Targets: local, and an
SSH host (without ``--host``: a loopback sshd from tests/sshd.py, which needs
``bash scripts/setup-ssh.sh``). Default protocol (wait 2, warmup 1, active 5,
20 timing calls). Goal: warm ≤ 1.0 s for ``rms_norm_naive`` here, and
≤ 0.35× the first cold run.

    OMP_NUM_THREADS=1 .venv/bin/python bench/warm_bench.py [--rounds 5] [--no-ssh]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lsprotocol import types  # noqa: E402

from tests.support.lsp_client import open_doc, start, stop  # noqa: E402

CASES = [
    ("rmsnorm.py", ROOT / "examples" / "rmsnorm.py", "rms_norm_naive"),
    ("tiny_gpt.py", ROOT / "bench" / "models" / "tiny_gpt.py", "gpt_forward"),
]


async def timed_profile(client, uri: str, function: str) -> float:
    started = time.perf_counter()
    reply = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(
            command="trainiumLens.profile", arguments=[{"uri": uri, "function": function}]
        )
    )
    elapsed = time.perf_counter() - started
    if not reply.get("run_ids"):
        raise SystemExit(f"profile failed: {reply}")
    return elapsed


async def session(tmp: Path, name: str, options: dict, env: dict, rounds: int) -> list[str]:
    clients = {}
    for mode, idle in (("cold", 0), ("warm", 300)):
        ws = tmp / f"{name}-{mode}"
        ws.mkdir()
        for file, source, _ in CASES:
            shutil.copy(source, ws / file)
        own = dict(options)
        if "workDir" in own:  # one per server: a shared one would share the host's lock
            own["workDir"] = f"{own['workDir']}-{mode}"
        clients[mode] = (
            await start(
                ws,
                options={"trainiumLens": {**own, "warmWorker": {"idleSeconds": idle}}},
                env={**env, "TRAINIUM_LENS_CACHE": str(tmp / f"cache-{name}-{mode}")},
            ),
            ws,
        )
    rows = []
    try:
        for file, _, function in CASES:
            uris = {mode: open_doc(client, ws / file) for mode, (client, ws) in clients.items()}
            # The first run of each server (the warm one starts its worker here).
            first_cold = await timed_profile(clients["cold"][0], uris["cold"], function)
            first_warm = await timed_profile(clients["warm"][0], uris["warm"], function)
            cold, warm = [], []
            for _ in range(rounds):
                cold.append(await timed_profile(clients["cold"][0], uris["cold"], function))
                warm.append(await timed_profile(clients["warm"][0], uris["warm"], function))
            ratios = [w / c for c, w in zip(cold, warm, strict=True)]
            rows.append(
                f"| {name} | `{function}` | {statistics.median(cold):.2f} "
                f"({min(cold):.2f}–{max(cold):.2f}) | {first_warm:.2f} | "
                f"{statistics.median(warm):.2f} ({min(warm):.2f}–{max(warm):.2f}) | "
                f"{statistics.median(ratios):.2f}× | {statistics.median(warm) / first_cold:.2f}× |"
            )
            print(rows[-1], flush=True)
    finally:
        for client, _ in clients.values():
            await stop(client)
    return rows


async def main_async(args) -> None:
    env = {"OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    with tempfile.TemporaryDirectory(prefix="warm-bench-") as name:
        tmp = Path(name)
        print(
            "| target | function | cold s (min–max) | warm first s | warm s (min–max) "
            "| warm/cold (pairs) | warm / first cold |"
        )
        print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
        if not args.only_ssh:
            await session(tmp, "local", {}, env, args.rounds)
        if args.no_ssh:
            return
        control = Path("/tmp") / f"tl-wbench-{os.getpid()}"
        control.mkdir(mode=0o700)
        server = None
        try:
            host, config = args.host, args.ssh_config
            if not host:
                from tests.support.sshd import start_loopback_sshd

                server = start_loopback_sshd(tmp / "sshd")
                host, config = "lens-test", str(server.config)
                # The remote sessions get the local runs' OMP_NUM_THREADS (an
                # oversubscribed 2-core machine makes a GPT forward 20x slower).
                keys = tmp / "sshd" / "authorized_keys"
                keys.write_text(
                    keys.read_text().replace(
                        'environment="HOME=',
                        f'environment="OMP_NUM_THREADS={env["OMP_NUM_THREADS"]}",environment="HOME=',
                        1,
                    )
                )
            options = {
                "host": host,
                "sshConfig": config,
                "remotePython": args.remote_python,
                "workDir": str(tmp / "remote-work") if server else None,
            }
            await session(
                tmp,
                "ssh",
                {k: v for k, v in options.items() if v},
                {**env, "TRAINIUM_LENS_SSH_CONTROL_DIR": str(control)},
                args.rounds,
            )
        finally:
            if server:
                server.stop()
            subprocess.run(["rm", "-rf", str(control)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-ssh", action="store_true")
    parser.add_argument("--only-ssh", action="store_true")
    parser.add_argument("--host")
    parser.add_argument("--ssh-config")
    parser.add_argument("--remote-python", default=sys.executable)
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()

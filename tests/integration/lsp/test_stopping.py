"""A SIGKILLed language server leaves no code running: a cold job's harness, and
a ``--nproc`` job's launcher, torchrun agent and ranks all end with it. Real
server (pytest-lsp), real processes, /proc scans by this test's
``TRAINIUM_LENS_CACHE``."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest
from lsprotocol import types

from tests.integration.cli.test_descendants import SPAWNS, alive, helper_pids
from tests.integration.cli.test_stopping import SLOW
from tests.support.lsp_client import open_doc, start
from tests.support.procs import cmdline, left_running, wait_for
from tests.support.ranks_cases import HANGS, job_processes, wait_for_files


@pytest.mark.parametrize("case", ["cold", "nproc", "helpers"])
async def test_kill_9_of_the_server_ends_every_process_of_the_run(tmp_path, case):
    """``helpers``: the profiled code started a child in a session of its own and a
    double-forked daemon, outside every process group; they end with the run too."""
    ws = tmp_path / "ws"
    ws.mkdir()
    name = {"cold": "slow.py", "nproc": "hangs.py", "helpers": "spawns.py"}[case]
    (ws / name).write_text({"cold": SLOW, "nproc": HANGS, "helpers": SPAWNS}[case])
    cache = tmp_path / "cache"
    client = await start(
        ws,
        options={"trainiumLens": {"warmWorker": {"idleSeconds": 0}}},  # cold: a harness per run
        env={
            "TRAINIUM_LENS_CACHE": str(cache),
            "LENS_TEST_STARTED": str(tmp_path / "started"),
            "LENS_TEST_PIDS": str(tmp_path / "helpers"),
            "OMP_NUM_THREADS": "1",
        },
    )
    marker = f"TRAINIUM_LENS_CACHE={cache}"
    uri = open_doc(client, ws / name)
    job = {"uri": uri, "function": "hangs"} if case == "helpers" else {"uri": uri}
    run = asyncio.ensure_future(
        client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="trainiumLens.profile", arguments=[job])
        )
    )
    loop = asyncio.get_running_loop()
    try:
        if case == "helpers":
            await loop.run_in_executor(None, wait_for, lambda: helper_pids(tmp_path), 300, "the helpers")
        else:
            started = (
                [tmp_path / "started"] if case == "cold" else [ws / "hangs.py.rank0", ws / "hangs.py.rank1"]
            )
            await loop.run_in_executor(None, wait_for_files, started)
        # server + harness (+ the two helpers) | server, launcher, agent, 2 ranks
        expected = {"cold": 2, "nproc": 5, "helpers": 4}[case]

        def all_running() -> list[str]:
            # a scan, not a snapshot: the daemon's pid is written before its execv, and a
            # process inside execv has no environment to read for a moment (CI saw 3 of 4)
            running = [cmdline(p) for p in job_processes(marker)]
            return running if len(running) >= expected else []

        await loop.run_in_executor(None, wait_for, all_running, 30, f"{expected} processes of the run")
        os.kill(client._server.pid, signal.SIGKILL)
        left = await loop.run_in_executor(None, left_running, marker)
        assert left == []
        if case == "helpers":
            assert [p for p in helper_pids(tmp_path) if alive(p)] == []
    finally:
        run.cancel()
        client.lens_stopped = True
        if client._server is not None and client._server.returncode is None:
            # failed before the kill: pygls's stop() only waits for the server to exit
            client._server.kill()
        await client.stop()

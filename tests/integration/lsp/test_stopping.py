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

from tests.integration.cli.test_stopping import SLOW
from tests.support.lsp_client import open_doc, start
from tests.support.procs import cmdline, left_running
from tests.support.ranks_cases import HANGS, job_processes, wait_for_files


@pytest.mark.parametrize("case", ["cold", "nproc"])
async def test_kill_9_of_the_server_ends_every_process_of_the_run(tmp_path, case):
    ws = tmp_path / "ws"
    ws.mkdir()
    name = "slow.py" if case == "cold" else "hangs.py"
    (ws / name).write_text(SLOW if case == "cold" else HANGS)
    cache = tmp_path / "cache"
    client = await start(
        ws,
        options={"trainiumLens": {"warmWorker": {"idleSeconds": 0}}},  # cold: a harness per run
        env={
            "TRAINIUM_LENS_CACHE": str(cache),
            "LENS_TEST_STARTED": str(tmp_path / "started"),
            "OMP_NUM_THREADS": "1",
        },
    )
    marker = f"TRAINIUM_LENS_CACHE={cache}"
    uri = open_doc(client, ws / name)
    run = asyncio.ensure_future(
        client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="trainiumLens.profile", arguments=[{"uri": uri}])
        )
    )
    try:
        started = [tmp_path / "started"] if case == "cold" else [ws / "hangs.py.rank0", ws / "hangs.py.rank1"]
        await asyncio.get_running_loop().run_in_executor(None, wait_for_files, started)
        running = [cmdline(p) for p in job_processes(marker)]
        expected = 2 if case == "cold" else 5  # server + harness | server, launcher, agent, 2 ranks
        assert len(running) >= expected, running
        os.kill(client._server.pid, signal.SIGKILL)
        left = await asyncio.get_running_loop().run_in_executor(None, left_running, marker)
        assert left == []
    finally:
        run.cancel()
        client.lens_stopped = True
        await client.stop()

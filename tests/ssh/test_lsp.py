"""The language server profiling on an SSH host: a real sshd on loopback
(tests/support/sshd.py; the "host" is this machine, its work dir a temp folder).

The editor's settings pick the host; the run syncs, profiles remotely, and the
hints show the remote run. Cancelling from the progress stops the remote
harness: no harness process is left under the host's sessions.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import sys
import time
from pathlib import Path

import pytest
from lsprotocol import types

from tests.conftest import EXAMPLES
from tests.support.lsp_client import hints, hover, open_doc, start, stop
from trainium_lens.model.store import RunStore

pytestmark = pytest.mark.ssh

NAIVE = "rms_norm_naive"


def remote_harnesses(home: Path) -> list[int]:
    """Harness processes started through the loopback sshd (their HOME is its)."""
    found = []
    marker = f"HOME={home}".encode()
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if b"trainium_lens.harness" not in (proc / "cmdline").read_bytes():
                continue
            if marker in (proc / "environ").read_bytes().split(b"\0"):
                found.append(int(proc.name))
        except OSError:
            continue
    return found


async def _start_on_host(ws, sshd, ssh_control_dir, tmp_path, protocol=None):
    """The real server, its settings on the loopback host, cold runs (no warm worker)."""
    lens = {
        "host": "lens-test",
        "sshConfig": str(sshd.config),
        "remotePython": sys.executable,
        "workDir": str(tmp_path / "remote work"),
        "warmWorker": {"idleSeconds": 0},
        **({"protocol": protocol} if protocol else {}),
    }
    env = {
        "TRAINIUM_LENS_CACHE": str(tmp_path / "cache"),
        "OMP_NUM_THREADS": "1",
        "TRAINIUM_LENS_SSH_CONTROL_DIR": str(ssh_control_dir),
    }
    return await start(ws, options={"trainiumLens": lens}, env=env)


async def test_profile_and_cancel_on_an_ssh_host(sshd, ssh_control_dir, tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    shutil.copy(EXAMPLES / "rmsnorm.py", ws / "rmsnorm.py")
    # The cold path's cancel (the warm worker's: tests/integration/lsp/test_warm.py).
    client = await _start_on_host(
        ws, sshd, ssh_control_dir, tmp_path, protocol={"wait": 0, "warmup": 1, "active": 2}
    )
    try:
        uri = open_doc(client, ws / "rmsnorm.py")
        reply = await client.workspace_execute_command_async(
            types.ExecuteCommandParams(
                command="trainiumLens.profile", arguments=[{"uri": uri, "function": NAIVE}]
            )
        )
        assert reply.get("run_ids"), reply
        result = RunStore(ws).get(reply["run_ids"][0])
        assert result.host == "lens-test" and result.function.protocol.active == 2
        shown = await hints(client, uri)
        assert sorted(shown) == sorted(s.line - 1 for s in result.lines)
        mul = next(s for s in result.lines if "x * x" in s.text)
        assert "on lens-test" in await hover(client, uri, mul.line - 1)
        messages = [str(v.message) for vs in client.progress_values.values() for v in vs]
        assert any("sync" in m.lower() or "connect" in m.lower() for m in messages), messages

        # Cancel the next run as soon as the harness reports: nothing is left running.
        task = asyncio.ensure_future(
            client.workspace_execute_command_async(
                types.ExecuteCommandParams(
                    command="trainiumLens.profile", arguments=[{"uri": uri, "function": NAIVE}]
                )
            )
        )

        def open_token():
            return [t for t, vs in client.progress_values.items() if vs and vs[-1].kind != "end"]

        deadline = time.monotonic() + 60
        while not (
            open_token() and any("import" in str(v.message) for v in client.progress_values[open_token()[0]])
        ):
            assert time.monotonic() < deadline and not task.done()
            await asyncio.sleep(0.05)
        (token,) = open_token()
        assert remote_harnesses(sshd.home)  # the harness runs on the host now
        client.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token=token))
        reply = await asyncio.wait_for(task, 30)
        assert reply["kind"] == "cancelled"
        deadline = time.monotonic() + 10
        while remote_harnesses(sshd.home) and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        assert not remote_harnesses(sshd.home)
        assert await hints(client, uri) == shown  # the earlier run still shows
    finally:
        await stop(client)


async def test_a_killed_server_leaves_nothing_on_the_host(sshd, ssh_control_dir, tmp_path):
    """The language server SIGKILLed while its run is on the host, and the profiled
    code there had started a child in a session of its own and a double-forked
    daemon: the ssh's end (the wrapper's lifeline) ends the harness and both."""
    from tests.integration.cli.test_descendants import SPAWNS, alive, helper_pids
    from tests.support.procs import wait_for

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "jobs.py").write_text(
        SPAWNS.replace('os.environ["LENS_TEST_PIDS"]', repr(str(tmp_path / "helpers")))
    )
    client = await _start_on_host(ws, sshd, ssh_control_dir, tmp_path)
    uri = open_doc(client, ws / "jobs.py")
    run = asyncio.ensure_future(
        client.workspace_execute_command_async(
            types.ExecuteCommandParams(
                command="trainiumLens.profile", arguments=[{"uri": uri, "function": "hangs"}]
            )
        )
    )
    loop = asyncio.get_running_loop()
    try:
        await loop.run_in_executor(
            None, wait_for, lambda: len(helper_pids(tmp_path)) == 2, 120, "the helpers"
        )
        assert remote_harnesses(sshd.home)  # the harness runs on the host now
        os.kill(client._server.pid, signal.SIGKILL)
        pids = helper_pids(tmp_path)
        await loop.run_in_executor(
            None,
            wait_for,
            lambda: not remote_harnesses(sshd.home) and not [p for p in pids if alive(p)],
            20,
            "the harness and the helpers gone from the host",
        )
    finally:
        run.cancel()
        client.lens_stopped = True
        await client.stop()


async def test_a_script_run_on_the_host_logs_its_output_and_keeps_the_protocol(
    sshd, ssh_control_dir, tmp_path
):
    """``trainiumLens.runScript`` with a host: the script's stdout, which comes back on
    this ssh's stdout, goes to the log; on the server's own stdout (the protocol's
    channel) it would break the connection."""
    from tests.integration.cli.test_run import project

    ws = project(tmp_path)
    client = await _start_on_host(ws, sshd, ssh_control_dir, tmp_path)
    try:
        uri = open_doc(client, ws / "tinylm" / "train.py")
        model = open_doc(client, ws / "tinylm" / "model.py")
        reply = await client.workspace_execute_command_async(
            types.ExecuteCommandParams(
                command="trainiumLens.runScript", arguments=[{"uri": uri, "args": ["--steps", "12"]}]
            )
        )
        assert reply["run_ids"] and reply["exit_status"] == 0, reply
        result = RunStore(ws).get(reply["run_ids"][0])
        assert result.host == "lens-test"
        assert {ln.file for ln in result.lines} >= {"tinylm/model.py", "tinylm/train.py"}
        logged = [m.message for m in client.log_messages]
        assert any(m.startswith("step 12 loss") for m in logged), logged[-20:]
        assert await hints(client, model)  # the server still answers: the channel is whole
    finally:
        await stop(client)

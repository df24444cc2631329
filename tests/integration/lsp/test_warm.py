"""The warm worker through the real language server (pytest-lsp), locally and
on the real loopback sshd: the second profile runs in the worker the first started,
edits and fresh globals show, crashes give clear errors, and no worker outlives
the idle time, the release command or the server (even a SIGKILLed one).

Workers are found by a /proc scan: a process running ``trainium_lens.harness.runtime.worker``
whose environment holds this test's ``TRAINIUM_LENS_CACHE`` (or the sshd's HOME).
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
from tests.support.lsp_client import open_doc, start, stop, until
from trainium_lens.model.store import RunStore

NAIVE = "rms_norm_naive"
# the fewest steps a job may measure: these tests assert where jobs ran and how they ended
FAST = {"wait": 0, "warmup": 0, "active": 1, "timing_calls": 1}


def workers(marker: str) -> list[int]:
    """Live worker processes (and their job children) whose environment holds ``marker``."""
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if b"trainium_lens.harness.runtime.worker" not in (proc / "cmdline").read_bytes():
                continue
            if (proc / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                continue
            if marker.encode() in (proc / "environ").read_bytes().split(b"\0"):
                found.append(int(proc.name))
        except OSError:
            continue
    return found


def ppid(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


async def gone(marker: str, limit: float = 20.0) -> bool:
    deadline = time.monotonic() + limit
    while workers(marker):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.1)
    return True


async def profile(client, uri: str, function: str = NAIVE) -> tuple[dict, float]:
    started = time.monotonic()
    reply = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(
            command="trainiumLens.profile", arguments=[{"uri": uri, "function": function}]
        )
    )
    return reply, time.monotonic() - started


async def cold_then_warm(client, ws: Path) -> tuple[str, dict]:
    """Profile rmsnorm.py twice: both run, the first starts the warm worker and the
    second runs in it, starting none; (the document's uri, the second reply). How much
    faster that makes it is measured side by side in bench/warm_bench.py."""
    uri = open_doc(client, ws / "rmsnorm.py")
    first, _ = await profile(client, uri)
    assert first.get("run_ids"), first
    await until(lambda: worker_states(client), "the worker's first state")
    assert [s["state"] for s in worker_states(client)] == ["warm"]
    second, _ = await profile(client, uri)
    assert second.get("run_ids"), second
    assert [s["state"] for s in worker_states(client)] == ["warm"]  # the same worker
    return uri, second


def worker_states(client) -> list[dict]:
    return [p for p in client.worker if isinstance(p, dict)]


async def started(ws: Path, tmp: Path, options: dict | None = None, env: dict | None = None):
    cache = str(tmp / "cache")
    client = await start(
        ws,
        options={"trainiumLens": {"protocol": FAST, **(options or {})}},
        env={"TRAINIUM_LENS_CACHE": cache, "OMP_NUM_THREADS": "1", **(env or {})},
    )
    return client, f"TRAINIUM_LENS_CACHE={cache}"


HELPER = "def scale(x):\n    return x * 2\n"
USES = """import torch
from scale_helper import scale

RUNS = []


def make_inputs():
    RUNS.append(1)
    return (torch.ones(64), len(RUNS))


# trainium: profile inputs=make_inputs
def scaled(x, runs):
    # A stale module (RUNS kept from the last job) would take the other branch.
    return scale(x) + 1 if runs == 1 else torch.sigmoid(x)
"""


@pytest.fixture
def ws(tmp_path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    shutil.copy(EXAMPLES / "rmsnorm.py", root / "rmsnorm.py")
    (root / "scale_helper.py").write_text(HELPER)
    (root / "uses_helper.py").write_text(USES)
    (root / "crash.py").write_text(
        "import ctypes\nimport os\n\nimport torch\n\n\ndef make_inputs():\n"
        "    return (torch.ones(4),)\n\n\n# trainium: profile inputs=make_inputs\n"
        "def exits(x):\n    os._exit(3)\n\n\n# trainium: profile inputs=make_inputs\n"
        "def segfaults(x):\n    ctypes.string_at(0)\n"
    )
    return root


def ops(ws: Path, reply: dict) -> set[str]:
    (run_id,) = reply["run_ids"]
    return {op.name for s in RunStore(ws).get(run_id).lines for op in s.ops}


async def test_warm_runs_locally(ws, tmp_path):
    client, marker = await started(ws, tmp_path)
    try:
        uri, _ = await cold_then_warm(client, ws)
        (pid,) = workers(marker)
        assert worker_states(client)[-1] == {"state": "warm", "host": "local", "pid": pid, "idle_s": 300.0}

        # An edit to a helper module shows; a global the last job changed is fresh.
        uses = open_doc(client, ws / "uses_helper.py")
        reply, _ = await profile(client, uses, "scaled")
        assert {"aten::mul", "aten::add"} <= ops(ws, reply), ops(ws, reply)
        reply, _ = await profile(client, uses, "scaled")
        assert "aten::sigmoid" not in ops(ws, reply)
        (ws / "scale_helper.py").write_text("import torch\n\n\ndef scale(x):\n    return torch.exp(x)\n")
        reply, _ = await profile(client, uses, "scaled")
        assert "aten::exp" in ops(ws, reply) and "aten::mul" not in ops(ws, reply)

        # Crashes: a clear error each, then the next run succeeds.
        crash = open_doc(client, ws / "crash.py")
        for function, words in (("exits", "exit status 3"), ("segfaults", "killed by SIGSEGV")):
            reply, _ = await profile(client, crash, function)
            assert reply["kind"] == "target" and words in reply["error"], reply
            assert any(words in m.message for m in client.messages)
            again, _ = await profile(client, uri)
            assert again.get("run_ids"), again

        # The release command ends the worker at once.
        reply = await client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="trainiumLens.releaseWorker", arguments=[])
        )
        assert reply == {"released": True, "host": "local"}
        assert await gone(marker, 5)
        await until(lambda: worker_states(client)[-1]["state"] == "none", "the worker's end told")
    finally:
        await stop(client)
    assert await gone(marker)


async def test_idle_timeout_ends_the_worker(ws, tmp_path):
    client, marker = await started(ws, tmp_path, {"warmWorker": {"idleSeconds": 2}})
    try:
        reply, _ = await profile(client, open_doc(client, ws / "rmsnorm.py"))
        assert reply.get("run_ids") and workers(marker)
        assert await gone(marker, 30)
        await until(lambda: len(worker_states(client)) == 2, "the worker's end told")
        assert [s["state"] for s in worker_states(client)] == ["warm", "none"]
    finally:
        await stop(client)


async def test_zero_idle_seconds_keeps_runs_cold(ws, tmp_path):
    client, marker = await started(ws, tmp_path, {"warmWorker": {"idleSeconds": 0}})
    try:
        reply, _ = await profile(client, open_doc(client, ws / "rmsnorm.py"))
        assert reply.get("run_ids") and not workers(marker) and not worker_states(client)
    finally:
        await stop(client)


# -- over the real sshd -------------------------------------------------------------------


@pytest.mark.ssh
async def test_warm_runs_on_an_ssh_host(sshd, ssh_control_dir, ws, tmp_path):
    options = {
        "host": "lens-test",
        "sshConfig": str(sshd.config),
        "remotePython": sys.executable,
        "workDir": str(tmp_path / "remote work"),
    }
    client, _ = await started(ws, tmp_path, options, {"TRAINIUM_LENS_SSH_CONTROL_DIR": str(ssh_control_dir)})
    remote = f"HOME={sshd.home}"
    try:
        _, second = await cold_then_warm(client, ws)
        assert RunStore(ws).get(second["run_ids"][0]).host == "lens-test"
        (pid,) = workers(remote)
        assert worker_states(client)[-1]["host"] == "lens-test"

        # An edited helper is synced and imported anew on the host.
        (ws / "scale_helper.py").write_text("import torch\n\n\ndef scale(x):\n    return torch.exp(x)\n")
        reply, _ = await profile(client, open_doc(client, ws / "uses_helper.py"), "scaled")
        assert "aten::exp" in ops(ws, reply), reply
        assert workers(remote) == [pid]

        # Killing the server closes the channel: the remote worker ends too.
        os.kill(client._server.pid, signal.SIGKILL)
        assert await gone(remote, 15)
    finally:
        client.lens_stopped = True
        await client.stop()


def job_children(worker: int) -> list[int]:
    return [int(p.name) for p in Path("/proc").glob("[0-9]*") if _parent(p) == worker]


def _parent(proc: Path) -> int | None:
    try:
        return int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError):
        return None


async def test_cancel_stops_the_job_and_keeps_the_worker_and_no_worker_outlives_a_killed_server(ws, tmp_path):
    (ws / "slow.py").write_text(
        "import time\n\nimport torch\n\n\ndef make_inputs():\n"
        "    return (torch.ones(4),)\n\n\n"
        "# trainium: profile inputs=make_inputs\ndef slow(x):\n"
        "    time.sleep(60)\n    return x\n"
    )
    client, marker = await started(ws, tmp_path)
    try:
        reply, _ = await profile(client, open_doc(client, ws / "rmsnorm.py"))
        assert reply.get("run_ids")
        (pid,) = workers(marker)
        uri = open_doc(client, ws / "slow.py")
        task = asyncio.ensure_future(profile(client, uri, "slow"))
        deadline = time.monotonic() + 60
        while not job_children(pid):
            assert time.monotonic() < deadline and not task.done()
            await asyncio.sleep(0.05)
        token = next(t for t, vs in client.progress_reports.items() if vs[-1].kind != "end")
        client.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token=token))
        reply, _ = await asyncio.wait_for(task, 30)
        assert reply["kind"] == "cancelled"
        assert not job_children(pid) and workers(marker) == [pid]
        reply, _ = await profile(client, open_doc(client, ws / "rmsnorm.py"))
        assert reply.get("run_ids") and workers(marker) == [pid]
        # the server's end, SIGKILLed (no shutdown): the worker it started goes with it
        os.kill(ppid(pid), signal.SIGKILL)  # the worker's parent is the server
        assert await gone(marker, 10)
    finally:
        client.lens_stopped = True
        await client.stop()

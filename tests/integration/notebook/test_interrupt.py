"""A kernel interrupt while ``%%trainium_lens`` runs a cell: the profiler stops,
nothing is stored, no run folder is left, and the kernel and its namespace live."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager

from tests.conftest import SERVER
from trainium_lens.model.store import RunStore
from trainium_lens.notebook.magic import STOPPED

SLOW = """\
%%trainium_lens
import time
time.sleep(0.2)
y = x @ x"""


def run(kc: Any, code: str, timeout: float = 120) -> tuple[dict, str]:
    """Execute ``code``; its reply and what it printed."""
    msg_id = kc.execute(code)
    printed = []
    while True:
        msg = kc.get_iopub_msg(timeout=timeout)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "stream":
            printed.append(msg["content"]["text"])
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            break
    return reply_to(kc, msg_id, timeout), "".join(printed)


def reply_to(kc: Any, msg_id: str, timeout: float = 120) -> dict:
    while True:
        msg = kc.get_shell_msg(timeout=timeout)
        if msg["parent_header"].get("msg_id") == msg_id:
            return msg["content"]


# a loop cell interrupted inside its window (--steps 3:400: ~800 steps of 20 ms on the cpu clock)
SLOW_LOOP = """\
%%trainium_lens --steps 3:400
for i in range(2000):
    (x @ w).sum().backward()
    opt.step()
    time.sleep(0.02)"""
LEFT = (
    "from torch.optim import optimizer as _o\n"
    "hooks = len(_o._global_optimizer_pre_hooks) + len(_o._global_optimizer_post_hooks)\n"
    "print('step' in opt.__dict__, hooks)"
)


@pytest.mark.parametrize(("cell", "left"), [(SLOW, None), (SLOW_LOOP, "False 0\n")], ids=["one-step", "loop"])
def test_an_interrupt_stops_the_run_and_keeps_the_kernel(tmp_path: Path, cell: str, left: str | None) -> None:
    work, kernels, cache = tmp_path / "work", tmp_path / "kernels" / "lens", tmp_path / "cache"
    work.mkdir()
    kernels.mkdir(parents=True)
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "lens",
        "language": "python",
        "env": {"PYTHONPATH": str(SERVER), "TRAINIUM_LENS_CACHE": str(cache)},
    }
    (kernels / "kernel.json").write_text(json.dumps(spec), encoding="utf-8")
    km = KernelManager(
        kernel_name="lens", kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(tmp_path / "kernels")])
    )
    km.start_kernel(cwd=str(work))
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=120)
        reply, _ = run(
            kc,
            "%load_ext trainium_lens\nimport sys, time, torch\nx = torch.randn(64, 64)\n"
            "w = torch.randn(64, 64, requires_grad=True)\nopt = torch.optim.SGD([w], lr=1e-3)",
        )
        assert reply["status"] == "ok", reply
        msg_id = kc.execute(cell)  # ten seconds and more of protocol, or of the loop's window
        time.sleep(3.0)
        km.interrupt_kernel()
        reply = reply_to(kc, msg_id)
        assert reply["status"] == "error" and reply["ename"] == "KeyboardInterrupt", reply
        assert reply["traceback"] == [STOPPED]  # one line, no frame of the tool's
        reply, printed = run(
            kc,
            "enabled = torch.autograd.profiler._is_profiler_enabled\n"
            "print(enabled, sys.getprofile(), float((x @ x).sum()) != 0)",
        )
        assert reply["status"] == "ok" and printed == "False None True\n", (reply, printed)
        if left is not None:  # nothing of the loop's run left on the optimizer or in torch's hooks
            reply, printed = run(kc, LEFT)
            assert reply["status"] == "ok" and printed == left, (reply, printed)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    assert RunStore(work).load_all() == []
    assert not [p for p in cache.glob("*/runs/*")], list(cache.glob("*/runs/*"))

"""The warm worker from the editor's side (docs/harness.md, "Warm worker").

Every target the server makes gets a ``targets.warm.slot.WarmSlot``: profile runs
then go to a warm harness (torch already imported) instead of a new process.
This module wires it to the editor:

* ``trainiumLens.warmWorker.idleSeconds`` is read at each run (0: every run is
  cold, and a held worker is released at once);
* ``trainiumLens/worker`` (server → client notification) says whether a worker
  is warm and where: ``{state: "warm"|"none", host, pid, idle_s}``, for the
  status bar;
* ``trainiumLens.releaseWorker`` (executeCommand, no arguments needed) ends the
  worker at once: ``{released: bool, host}``.

Workers end with the server: ``shutdown`` closes the target, and a killed server
closes the workers' stdin, which ends them (harness/runtime/worker.py).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from trainium_lens.lsp.state import LensServer

log = logging.getLogger(__name__)

RELEASE = "trainiumLens.releaseWorker"
NOTIFICATION = "trainiumLens/worker"


def attach(ls: LensServer, target: Any) -> None:
    """Give a new target its warm slot (targets without a ``warm`` attribute,
    e.g. another area's, stay cold)."""
    if not hasattr(target, "warm"):
        return
    from trainium_lens.targets.warm.slot import WarmSlot

    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        loop = None

    def on_change(state: dict) -> None:  # any thread → the event loop
        if loop is None or loop.is_closed():
            return
        loop.call_soon_threadsafe(_notify, ls, state)

    target.warm = WarmSlot(target.host, lambda: ls.settings.warm_idle_seconds, on_change)


def _notify(ls: LensServer, state: dict) -> None:
    try:
        ls.protocol.notify(NOTIFICATION, state)
    except Exception:  # noqa: BLE001 - the client may be gone (shutdown)
        log.debug("worker notification not sent", exc_info=True)


def held(ls: LensServer) -> dict | None:
    """The worker the current target holds: {host, pid, idle_s}, else None."""
    target = getattr(ls, "_target", None)
    slot = getattr(target, "warm", None)
    return slot.held() if slot is not None else None


def release(ls: LensServer) -> dict:
    target = getattr(ls, "_target", None)
    slot = getattr(target, "warm", None)
    host = getattr(target, "host", ls.settings.host)
    released = bool(slot is not None and slot.close())
    return {"released": released, "host": host}


def register(server: LensServer) -> None:
    server.on_new_target.append(attach)

    @server.command(RELEASE)
    async def release_command(ls: LensServer, *args: Any) -> dict:
        loop = asyncio.get_running_loop()
        reply = await loop.run_in_executor(None, release, ls)
        ls.show(
            f"Trainium Lens: released the warm worker on {reply['host']}"
            if reply["released"]
            else "Trainium Lens: no warm worker is held"
        )
        return reply

    def settings_changed(ls: LensServer) -> None:
        if ls.settings.warm_idle_seconds <= 0:
            release(ls)

    server.on_settings_change.append(settings_changed)

"""/proc scans for the stop-anywhere tests: which processes a run left, who
their parent is, and which TCP ports they listen on (Linux)."""

from __future__ import annotations

import os
import signal
import socket
import struct
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from tests.support.ranks_cases import alive, job_processes


def ppid(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError):
        return None


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return ""


def wait_for(check: Callable[[], object], seconds: float, what: str) -> object:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"never happened within {seconds:g} s: {what}")


def left_running(marker: str, seconds: float = 15.0, *, besides: str | None = None) -> list[str]:
    """Wait until no live process has ``marker`` in its environment (a run's
    ``TRAINIUM_LENS_CACHE``); returns what is still there, described. A process
    whose command line holds ``besides`` is allowed to stay (e.g. the shared SSH
    master, which ControlPersist keeps by design)."""

    def left() -> list[int]:
        return [p for p in job_processes(marker) if besides is None or besides not in cmdline(p)]

    deadline = time.monotonic() + seconds
    now = left()
    while now and time.monotonic() < deadline:
        time.sleep(0.1)
        now = left()
    return [f"{pid}: {cmdline(pid)[:150]}" for pid in now if alive(pid)]


def _socket_inodes(pid: int) -> set[int]:
    out = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                out.add(int(target[8:-1]))
    except OSError:
        pass
    return out


def _address(hex_addr: str, v6: bool) -> str:
    raw = bytes.fromhex(hex_addr)
    if v6:  # four little-endian 32-bit words
        raw = b"".join(struct.pack("<I", struct.unpack(">I", raw[i : i + 4])[0]) for i in range(0, 16, 4))
        return socket.inet_ntop(socket.AF_INET6, raw)
    return socket.inet_ntop(socket.AF_INET, struct.pack("<I", int(hex_addr, 16)))


def listening(pids: list[int]) -> list[tuple[int, str, int]]:
    """(pid, address, port) of every TCP socket in LISTEN state the processes hold."""
    owners = {inode: pid for pid in pids for inode in _socket_inodes(pid)}
    found = []
    for table, v6 in (("/proc/net/tcp", False), ("/proc/net/tcp6", True)):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            if cols[3] != "0A":  # LISTEN
                continue
            inode = int(cols[9])
            if inode in owners:
                addr, port = cols[1].split(":")
                found.append((owners[inode], _address(addr, v6), int(port, 16)))
    return found


def stop_as(proc: subprocess.Popen, how: str) -> None:
    """Stop a running CLI the way ``how`` names (``cancel``: Ctrl-C; ``timeout``: its
    own ``--timeout`` ends it; ``kill -9``) and check the status that way gives."""
    if how == "cancel":
        proc.send_signal(signal.SIGINT)  # Ctrl-C
    elif how == "kill -9":
        proc.kill()
    proc.wait(timeout=300)
    expected = {"cancel": 130, "timeout": 124, "kill -9": -signal.SIGKILL}[how]
    assert proc.returncode == expected, proc.stderr.read() if proc.stderr else ""

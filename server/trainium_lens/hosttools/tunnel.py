"""Local forwards over SSH, bound to 127.0.0.1, that live as long as we do.

``Tunnel`` is one ``ssh`` process forwarding any number of ports; a busy local
port is refused before ssh starts, naming the process that holds it when this
user can see it (Linux ``/proc``). Used by ``hosttools/explorer/service.py`` (Neuron Explorer's
UI and API ports).
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from trainium_lens.errors import LensError
from trainium_lens.targets.ssh.conn import SshConnection, explain_ssh_failure


class TunnelError(LensError):
    exit_code = 4


@dataclass(frozen=True)
class Forward:
    local: int  # 127.0.0.1 port here
    remote: int  # 127.0.0.1 port on the host
    label: str  # what it is, for messages ("Neuron Explorer UI")
    hint: str  # how to choose another local port


def port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # As ssh binds its listeners: a port in TIME_WAIT from earlier use is free.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def port_owner(port: int) -> str | None:
    """Who listens on a local TCP port: "pid 123 (cmd line)", best effort (Linux /proc)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            if len(cols) > 9 and cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(cols[9])
    if not inodes:
        return None
    targets = {f"socket:[{i}]" for i in inodes}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") in targets:
                    raw = Path(f"/proc/{pid}/cmdline").read_bytes()
                    cmd = " ".join(raw.decode("utf-8", "replace").split("\0")).strip()
                    return f"pid {pid} ({cmd[:120]})"
            except OSError:
                continue
    return "another process (not visible to this user)"


def busy_port_message(forward: Forward) -> str:
    owner = port_owner(forward.local)
    by = f" by {owner}" if owner else ""
    return f"local port {forward.local} ({forward.label}) is already in use{by}: stop it, or {forward.hint}"


def _connectable(port: int, timeout: float = 0.3) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=timeout).close()
        return True
    except OSError:
        return False


class Tunnel:
    """One ``ssh`` forwarding both Explorer ports, bound to 127.0.0.1.

    Its own connection (``ControlPath=none``) with the target's other options:
    a forward held by the shared master would live as long as the master
    (ControlPersist) instead of as long as we need it. The remote side runs
    ``cat``; our end of its stdin is a pipe, so when this process exits for
    any reason (even SIGKILL) the pipe closes, ``cat`` ends, and ssh closes the
    tunnel: no tunnel outlives the server that opened it.
    """

    def __init__(self, conn: SshConnection, forwards: list[Forward]) -> None:
        self.conn = conn
        self.forwards = forwards
        self.proc: subprocess.Popen | None = None

    def argv(self) -> list[str]:
        # Before the target's options (argv(extra=)), which name its ControlMaster
        # socket: ssh keeps the first value it sees of an option.
        extra = ["-o", "ControlPath=none", "-o", "ExitOnForwardFailure=yes", "-T"]
        for f in self.forwards:
            extra += ["-L", f"127.0.0.1:{f.local}:127.0.0.1:{f.remote}"]
        return self.conn.argv("exec cat >/dev/null", extra=extra)

    def start(self, timeout: float = 20.0) -> None:
        for f in self.forwards:
            if not port_free(f.local):
                raise TunnelError(busy_port_message(f))
        self.proc = proc = subprocess.Popen(
            self.argv(), stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        assert proc.stderr is not None  # stderr=PIPE
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                err = proc.stderr.read().decode("utf-8", "replace")
                self.proc = None
                m = re.search(r"bind \[?127\.0\.0\.1\]?:(\d+): Address already in use", err)
                busy = [f for f in self.forwards if m and f.local == int(m[1])]
                if busy:  # taken between our check and ssh's bind
                    raise TunnelError(busy_port_message(busy[0]))
                raise TunnelError("cannot open the tunnel: " + explain_ssh_failure(self.conn.host, err))
            if all(_connectable(f.local) for f in self.forwards):
                return
            time.sleep(0.05)
        self.close()
        raise TunnelError(f"{self.conn.host}: the tunnel did not come up in {timeout:.0f} s")

    def alive(self) -> bool:
        return (
            self.proc is not None
            and self.proc.poll() is None
            and all(_connectable(f.local) for f in self.forwards)
        )

    def close(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        try:
            if proc.stdin:
                proc.stdin.close()  # remote cat ends, ssh exits and releases both ports
            proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait(timeout=5)
        if proc.stderr:
            proc.stderr.close()

"""One OpenSSH connection to a host: argv building, a shared master, clear errors.

Everything goes through the user's own ``ssh`` binary so their ``~/.ssh/config``
(aliases, users, ports, keys, agent, ProxyJump) applies unchanged. We only add
options that make a run safe to automate: ``BatchMode`` (no hidden prompt can
hang a run), strict host-key checking (an unknown or changed key is refused,
never accepted silently), keepalives, a connect timeout, and a private
ControlMaster socket so later commands skip the handshake.

Remote commands are always ``sh -c SCRIPT sh ARG...`` with every argument
``shlex.quote``d: the remote login shell re-parses what ssh sends, so nothing
a user typed (paths, names) is ever pasted into it unquoted.

The master is shared by every run to a host on this machine (two CLI runs, the
language server, its warm worker, Explorer's commands), so it is
reference-counted: each ``SshConnection`` that uses it holds a shared ``flock``
on ``<socket>.users`` until ``close()``, and ``close()`` stops the master
(``ssh -O exit``) only when it can then take that lock exclusively, i.e. when
no one else holds it. The kernel drops the lock of a process that dies, however
it dies, so a killed run never pins a master; a master left without users by a
kill exits by itself ``PERSIST_S`` after its last session closes.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import shlex
import socket
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

from trainium_lens.errors import TargetError

CONNECT_TIMEOUT_S = 10
# A master nobody closed (its last user was killed) exits this long after its
# last session; the users close it themselves otherwise (see the module docstring).
PERSIST_S = 60
# Unix socket paths are limited to 104 (macOS) / 108 (Linux) bytes; our socket names are 20.
_SOCKET_PATH_MAX = 100


def control_dir() -> Path:
    """A private (0700) folder for the control sockets, short enough for them."""
    override = os.environ.get("TRAINIUM_LENS_SSH_CONTROL_DIR")
    candidates = [Path(override)] if override else []
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        candidates.append(Path(runtime) / "trainium-lens")
    candidates.append(Path.home() / ".cache" / "trainium-lens" / "ssh")
    candidates.append(Path(tempfile.gettempdir()) / f"trainium-lens-{os.getuid()}")
    for folder in candidates:
        if len(str(folder)) + 1 + 20 > _SOCKET_PATH_MAX:
            continue
        try:
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            if folder.stat().st_uid != os.getuid():
                continue  # someone else's folder: never put our sockets there
            folder.chmod(0o700)
            return folder
        except OSError:
            continue
    raise TargetError(
        "no private folder for the SSH control socket (set TRAINIUM_LENS_SSH_CONTROL_DIR to a short path)"
    )


class SshFailure(TargetError):
    """ssh itself failed (exit 255); ``kind`` is ``classify_ssh_failure``'s answer."""

    def __init__(self, host: str, stderr: str) -> None:
        super().__init__(explain_ssh_failure(host, stderr))
        self.kind = classify_ssh_failure(stderr)


class SshConnection:
    """``ssh HOST`` with our options; ``master()`` starts the shared connection."""

    def __init__(
        self,
        host: str,
        ssh_config: str | None = None,
        control_path_dir: Path | None = None,
        ssh_binary: str = "ssh",
    ):
        if not host or host.startswith("-") or any(c.isspace() for c in host):
            raise TargetError(f"not a valid SSH host name: {host!r}")
        self.host = host
        self.ssh_config = ssh_config
        if ssh_config and not Path(ssh_config).expanduser().is_file():
            raise TargetError(f"no such SSH config file: {ssh_config}")
        self.ssh_binary = ssh_binary
        self._control_dir = control_path_dir
        self._master_checked = False
        self._users_fd: int | None = None  # our shared lock on <socket>.users, while we use the master

    # -- argv ----------------------------------------------------------------
    def control_path(self) -> Path:
        """Our own name for the socket (not ``%C``): we must know it to remove a
        stale one left by a master that died with its connection."""
        key = f"{self.ssh_config or ''}\0{self.host}".encode("utf-8", "surrogateescape")
        return (self._control_dir or control_dir()) / hashlib.sha256(key).hexdigest()[:20]

    def options(self, master: bool = False) -> list[str]:
        """The options every ssh (and rsync's ssh) call gets. ``ssh`` keeps the
        first value it sees of an option, so the master's differ here."""
        opts: list[str] = []
        if self.ssh_config:
            opts += ["-F", str(Path(self.ssh_config).expanduser())]
        opts += [
            "-o",
            "BatchMode=yes",
            # Command-line options win over the user's config: a config that says
            # "no" or "accept-new" cannot weaken the check for our runs.
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            f"ConnectTimeout={CONNECT_TIMEOUT_S}",
            "-o",
            "ServerAliveInterval=15",
            "-o",
            "ServerAliveCountMax=3",
            "-o",
            f"ControlPath={self.control_path()}",
        ]
        if master:
            opts += ["-o", "ControlMaster=yes", "-o", f"ControlPersist={PERSIST_S}"]
        else:
            opts += ["-o", "ControlMaster=no"]
        return opts

    def argv(
        self, script: str | None = None, args: Sequence[str] = (), *, extra: Sequence[str] = ()
    ) -> list[str]:
        """``ssh ... HOST sh -c SCRIPT sh ARGS...``, every word quoted for the remote shell.

        ``extra`` options go before ours: ssh keeps the first value it sees of an
        option, so they win (e.g. the tunnel's ``ControlPath=none``)."""
        cmd = [self.ssh_binary, *extra, *self.options(), "--", self.host]
        if script is not None:
            cmd.append(" ".join(shlex.quote(w) for w in ["sh", "-c", script, "sh", *args]))
        return cmd

    def rsync_shell(self) -> str:
        """The ``rsync -e`` value: rsync splits it on spaces, honouring quotes."""
        return " ".join(shlex.quote(w) for w in [self.ssh_binary, *self.options()])

    # -- the shared connection ---------------------------------------------------
    def users_path(self) -> Path:
        return self.control_path().with_name(self.control_path().name + ".users")

    def _hold(self) -> None:
        """Count us among the master's users (blocks while a last user is
        stopping it: we then start a new one)."""
        if self._users_fd is not None:
            return
        fd = os.open(self.users_path(), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
        except OSError:
            os.close(fd)
            raise
        self._users_fd = fd

    def master(self) -> None:
        """Make sure a master connection is up; raise a clear ``TargetError`` if not."""
        self._hold()
        if self._master_checked and self._master_alive():
            return
        # One starter at a time on this machine: two runs that both found no
        # master would otherwise remove each other's fresh socket.
        with self._starting():
            if not self._master_alive():
                self._start_master()
        self._master_checked = True

    @contextlib.contextmanager
    def _starting(self) -> Iterator[None]:
        path = self.control_path().with_name(self.control_path().name + ".start")
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _start_master(self) -> None:
        try:
            self.control_path().unlink()  # stale: ssh -M would not replace it
        except FileNotFoundError:
            pass
        # stderr goes to a file, not a pipe: the persisted master would hold
        # a pipe open for its whole life and hang whoever reads it.
        with tempfile.TemporaryFile() as err:
            cmd = [self.ssh_binary, *self.options(master=True), "-N", "-f", "--", self.host]
            try:
                proc = subprocess.run(
                    cmd,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=err,
                    timeout=CONNECT_TIMEOUT_S * 3,
                )
            except FileNotFoundError:
                raise TargetError("the OpenSSH client `ssh` is not installed here") from None
            except subprocess.TimeoutExpired:
                raise TargetError(
                    f"{self.host}: the SSH connection did not come up in {CONNECT_TIMEOUT_S * 3} s"
                ) from None
            err.seek(0)
            text = err.read().decode("utf-8", "replace")
        if proc.returncode != 0:
            raise SshFailure(self.host, text)

    def _master_alive(self) -> bool:
        """Is a master listening on our socket? Asked by connecting to the socket
        (no process start: ``ssh -O check`` costs tens of ms on every run)."""
        path = self.control_path()
        if not path.exists():
            return False
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(2)
            try:
                sock.connect(str(path))
            except OSError:
                return False
        return True

    def close(self) -> None:
        """We are done with the master: stop it (``ssh -O exit``) if no one else
        uses it; later calls start a new one."""
        fd, self._users_fd = self._users_fd, None
        self._master_checked = False
        if fd is None:
            return  # never used it: nothing of ours to stop
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return  # another run, the language server or its warm worker still uses it
            try:
                subprocess.run(
                    [self.ssh_binary, *self.options(), "-O", "exit", "--", self.host],
                    stdin=subprocess.DEVNULL,
                    capture_output=True,
                    timeout=10,
                )
            except (OSError, subprocess.TimeoutExpired):
                pass
        finally:
            os.close(fd)  # drops our lock (a user waiting in _hold goes on)

    # -- commands ----------------------------------------------------------------
    def run(
        self, script: str, args: Sequence[str] = (), *, input: bytes | None = None, timeout: float | None = 60
    ) -> subprocess.CompletedProcess:
        """Run a fixed remote script (over the master); raise on SSH failure (255)."""
        self.master()
        try:
            proc = subprocess.run(
                self.argv(script, list(args)),
                input=input,
                stdin=None if input is not None else subprocess.DEVNULL,
                capture_output=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            raise TargetError(f"{self.host}: a remote command did not finish in {timeout:.0f} s") from None
        if proc.returncode == 255:
            raise SshFailure(self.host, proc.stderr.decode("utf-8", "replace"))
        return proc


# -- turning ssh's stderr into one clear line ---------------------------------
def classify_ssh_failure(stderr: str) -> str:
    """Which step failed: ``host_key_changed``, ``host_key_unknown``, ``resolve``,
    ``refused``, ``timeout``, ``unreachable``, ``auth``, ``closed`` or ``other``."""
    low = (stderr or "").lower()
    if "remote host identification has changed" in low or ("host key for" in low and "has changed" in low):
        return "host_key_changed"
    if ("no " in low and "host key is known" in low) or "host key verification failed" in low:
        return "host_key_unknown"
    if (
        "could not resolve hostname" in low
        or "name or service not known" in low
        or "temporary failure in name resolution" in low
    ):
        return "resolve"
    if "connection refused" in low:
        return "refused"
    if "timed out" in low:
        return "timeout"
    if "no route to host" in low or "network is unreachable" in low:
        return "unreachable"
    if "permission denied" in low or "too many authentication failures" in low:
        return "auth"
    if (
        "connection closed" in low
        or "connection reset" in low
        or "broken pipe" in low
        or "closed by remote host" in low
    ):
        return "closed"
    return "other"


def explain_ssh_failure(host: str, stderr: str) -> str:
    """One line: what went wrong and how to fix it, from ssh's own messages."""
    kind = classify_ssh_failure(stderr)
    if kind == "host_key_changed":
        return (
            f"{host}: the host key has CHANGED since it was recorded in known_hosts "
            f"(refused: this can mean an attack, or the host was rebuilt); if you trust "
            f"the new key, remove the old one with `ssh-keygen -R <host>` and connect once "
            f"with `ssh {host}` to check and accept it"
        )
    if kind == "host_key_unknown":
        return (
            f"{host}: host key not known (no known_hosts entry): connect once with "
            f"`ssh {host}` and check the fingerprint, or add it with `ssh-keyscan`; "
            f"Trainium Lens never accepts host keys itself"
        )
    if kind == "resolve":
        return f"{host}: the host name does not resolve: check the name and your ssh config"
    if kind == "refused":
        return f"{host}: connection refused: is sshd running there, and is the port in your ssh config right?"
    if kind == "timeout":
        return f"{host}: the connection timed out: is the host up and reachable?"
    if kind == "unreachable":
        return f"{host}: no route to the host: check the network (VPN?) and the address"
    if kind == "auth":
        return (
            f"{host}: authentication failed (no password prompts: BatchMode): load your "
            f"key into ssh-agent or set User/IdentityFile for this host in your ssh config"
        )
    if kind == "closed":
        return f"{host}: the SSH connection was closed by the host"
    last = _last_line(stderr or "")
    return f"{host}: ssh failed" + (f": {last}" if last else "")


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    lines = [ln for ln in lines if not re.match(r"^(@+|warning:)", ln, re.I)]
    return lines[-1][:200] if lines else ""

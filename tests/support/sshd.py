"""A real OpenSSH server on loopback for the SSH tests (a pytest plugin).

``sshd`` (session scope) starts ``/usr/sbin/sshd`` with its own config, host key
and authorized_keys in a temp folder, on a free port of 127.0.0.1, and writes an
ssh config file with these aliases (tests pass it as ``ssh_config``):

* ``lens-test``     the server, with a key it accepts and its host key known
* ``lens-badauth``  the server, with a key it does not accept
* ``lens-unknown``  the server, with an empty known_hosts
* ``lens-changed``  the server, with a different key recorded for it
* ``lens-refused``  a loopback port where nothing listens

The "remote host" is this machine as the same user; the server's
authorized_keys sets ``HOME`` for the session to a temp folder, so the default
work dir (``~/.cache/trainium-lens/...``) lands there, never in the real home.
Without the sshd/ssh/rsync binaries the tests skip on a developer's machine and
fail in CI (tests/conftest.py); ``scripts/setup-ssh.sh`` installs them.
"""

from __future__ import annotations

import getpass
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

SSHD = "/usr/sbin/sshd"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _keygen(path: Path) -> str:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "lens-test", "-f", str(path)],
        check=True,
        stdin=subprocess.DEVNULL,
    )
    return Path(str(path) + ".pub").read_text().strip()


def _children(pid: int) -> list[int]:
    """Every descendant of ``pid`` (from /proc)."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        parents.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _is_sshd(pid: int) -> bool:
    try:
        return os.readlink(f"/proc/{pid}/exe") == SSHD
    except OSError:
        return False


@dataclass
class Sshd:
    root: Path
    port: int
    config: Path  # the ssh *client* config with the aliases
    home: Path  # HOME of the remote sessions
    known_hosts: Path
    host_pub: str
    proc: subprocess.Popen | None = None
    log: Path = field(init=False)

    def __post_init__(self) -> None:
        self.log = self.root / "sshd.log"

    def logins(self) -> int:
        """Connections authenticated so far (sshd logs one ``Accepted publickey`` each)."""
        return self.log.read_text(errors="replace").count("Accepted publickey")

    def start(self) -> None:
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [SSHD, "-f", str(self.root / "sshd_config"), "-D", "-e"],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
            )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"sshd exited: {self.log.read_text()[-500:]}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("sshd did not start listening")

    def kill_all(self) -> None:
        """Drop every connection at once, as a crashed host or network would:
        kill the listener and every per-connection sshd process (not the
        commands they started: those must notice the drop themselves)."""
        if self.proc is None:
            return
        victims = [p for p in _children(self.proc.pid) if _is_sshd(p)]
        for pid in [self.proc.pid, *victims]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait(timeout=10)
        self.proc = None

    def drop_connections(self) -> None:
        """Drop every open connection but keep listening, as a network blip or an
        idle-timeout on the way would: the host stays reachable for a new one."""
        if self.proc is None:
            return
        for pid in [p for p in _children(self.proc.pid) if _is_sshd(p)]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def stop(self) -> None:
        self.kill_all()

    def ssh(self, alias: str, *command: str, timeout: float = 20) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["ssh", "-F", str(self.config), "-o", "BatchMode=yes", alias, *command],
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )


def _missing_binaries() -> list[str]:
    return [b for b in (SSHD, "ssh", "ssh-keygen", "rsync") if not shutil.which(b)]


def start_loopback_sshd(root: Path) -> Sshd:
    """Write the keys and configs into ``root`` and start the server (also used by
    bench/ssh_bench.py)."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    try:
        Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege-separation dir
    except PermissionError:
        pass  # not root: scripts/setup-ssh.sh makes it
    home = root / "remote home"  # a space: the default work dir must survive it
    home.mkdir()
    host_pub = _keygen(root / "host_key")
    client_pub = _keygen(root / "client_key")
    _keygen(root / "stranger_key")
    other_host_pub = _keygen(root / "other_host_key")
    port, dead_port = _free_port(), _free_port()
    # One torch thread, as the local tests run it (tests/conftest.py): the remote sessions
    # run beside the rest of the suite on 2 cores, where a second intra-op thread only
    # spins while the other works (the suite's run queue is 5-9 deep there).
    env = [f"HOME={home}", "OMP_NUM_THREADS=1"]
    if os.environ.get("TRAINIUM_LENS_ROOF"):  # the machine's roof, shared by the tests (tests/conftest.py)
        env.append(f"TRAINIUM_LENS_ROOF={os.environ['TRAINIUM_LENS_ROOF']}")
    if os.environ.get("TRAINIUM_LENS_CALIBRATION"):  # and its calibration
        env.append(f"TRAINIUM_LENS_CALIBRATION={os.environ['TRAINIUM_LENS_CALIBRATION']}")
    options = ",".join(f'environment="{e}"' for e in env)
    (root / "authorized_keys").write_text(f"{options} {client_pub}\n")
    (root / "sshd_config").write_text(f"""\
Port {port}
ListenAddress 127.0.0.1
HostKey {root}/host_key
PidFile {root}/sshd.pid
AuthorizedKeysFile {root}/authorized_keys
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
PermitRootLogin prohibit-password
PermitUserEnvironment yes
StrictModes no
UsePAM no
AllowTcpForwarding yes
MaxSessions 64
MaxStartups 64
LogLevel INFO
""")
    key_type, key_b64 = host_pub.split()[:2]
    other_type, other_b64 = other_host_pub.split()[:2]
    known = root / "known_hosts"
    known.write_text(f"[127.0.0.1]:{port} {key_type} {key_b64}\n")
    (root / "known_hosts_empty").write_text("")
    (root / "known_hosts_changed").write_text(f"[127.0.0.1]:{port} {other_type} {other_b64}\n")
    common = f"""  HostName 127.0.0.1
  User {getpass.getuser()}
  IdentitiesOnly yes
  GlobalKnownHostsFile /dev/null
  UpdateHostKeys no
"""
    config = root / "ssh_config"
    config.write_text(f"""\
Host lens-test
{common}  Port {port}
  IdentityFile {root}/client_key
  UserKnownHostsFile {known}

Host lens-badauth
{common}  Port {port}
  IdentityFile {root}/stranger_key
  UserKnownHostsFile {known}

Host lens-unknown
{common}  Port {port}
  IdentityFile {root}/client_key
  UserKnownHostsFile {root}/known_hosts_empty

Host lens-changed
{common}  Port {port}
  IdentityFile {root}/client_key
  UserKnownHostsFile {root}/known_hosts_changed

Host lens-refused
{common}  Port {dead_port}
  IdentityFile {root}/client_key
  UserKnownHostsFile {known}
""")
    server = Sshd(root=root, port=port, config=config, home=home, known_hosts=known, host_pub=host_pub)
    server.start()
    return server


@pytest.fixture(scope="session")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    missing = _missing_binaries()
    if missing:
        pytest.skip(f"needs {', '.join(missing)} (scripts/setup-ssh.sh installs them)")
    server = start_loopback_sshd(tmp_path_factory.mktemp("sshd"))
    yield server
    server.stop()


@pytest.fixture
def ssh_control_dir(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    """A private control-socket folder per test (short: socket paths are limited),
    so a test never reuses a master another test left behind."""
    folder = Path("/tmp") / f"tl-cm-{os.getpid()}-{time.monotonic_ns() % 10**9}"
    folder.mkdir(mode=0o700)
    monkeypatch.setenv("TRAINIUM_LENS_SSH_CONTROL_DIR", str(folder))
    yield folder
    for sock in folder.iterdir():  # stop the masters this test started
        subprocess.run(
            ["ssh", "-o", f"ControlPath={sock}", "-O", "exit", "x"], capture_output=True, timeout=10
        )
    shutil.rmtree(folder, ignore_errors=True)

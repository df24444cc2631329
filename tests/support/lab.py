"""The two-node lab (scripts/lab-nodes.sh, docs/lab.md) for pytest.

``lab_up()`` builds the lab (idempotent) and returns a :class:`Lab`; the
session-scoped ``lab`` fixture (loaded by tests/conftest.py) does that once per
session and takes the lab down at the end. It skips only where the lab cannot
exist: not root, or a kernel that refuses network namespaces; under CI
tests/conftest.py turns that skip into a failure, like every other skip that
does not name missing hardware.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "lab-nodes.sh"
# The interpreter the nodes run (same path on every node: only homes are private).
REPO_PYTHON = os.environ.get("TRAINIUM_LENS_LAB_PYTHON") or str(ROOT / ".venv" / "bin" / "python")
# Kept in step with scripts/lab-nodes.sh (NS_PREFIX, IFNAME).
NETNS_PREFIX = "tlens-"
IFNAME = "lab0"


@dataclass
class Lab:
    ssh_config: Path
    hosts: list[str] = field(default_factory=lambda: ["node1", "node2"])
    login: str = "login"

    def ssh_argv(self, host: str, cmd: str) -> list[str]:
        return ["ssh", "-F", str(self.ssh_config), host, cmd]

    def run(
        self, host: str, cmd: str, timeout: float = 60, check: bool = False
    ) -> subprocess.CompletedProcess:
        """``cmd`` (a shell command line) on ``host`` through the lab's ssh config."""
        return subprocess.run(
            self.ssh_argv(host, cmd),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=check,
            stdin=subprocess.DEVNULL,
        )

    def procs_on(self, host: str) -> dict[int, str]:
        """pid -> command line of every process in ``host``'s network namespace
        (read from /proc here, so looking does not add a process there)."""
        want = os.stat(f"/run/netns/{NETNS_PREFIX}{host}").st_ino
        out = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                if os.stat(f"/proc/{entry}/ns/net").st_ino != want:
                    continue
                raw = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue  # gone meanwhile
            out[int(entry)] = raw.replace(b"\0", b" ").decode("utf-8", "replace").strip()
        return out

    def restart_slurmd(self, host: str, seconds: float = 60) -> None:
        """Start ``host``'s slurmd again (after a test killed it) the way
        scripts/lab-nodes.sh starts it, in that host's namespaces, and wait until the
        controller has the node back (``ReturnToService=2``). The lab stays up: no
        rebuild, so what the dead slurmd left is still there for the test to see go."""
        lab_dir = self.ssh_config.parent
        if not any(cmd.split()[:1] == ["slurmd"] for cmd in self.procs_on(host).values()):
            holder = (lab_dir / "run" / f"holder-{host}.pid").read_text().strip()
            with open(lab_dir / "log" / f"slurmd-{host}.out", "a") as out:
                subprocess.run(
                    ["nsenter", "--target", holder, "--net", "--uts", "--mount", "--", "slurmd"],
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=out,
                    check=True,
                    timeout=seconds,
                )
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            res = self.run(self.login, f"sinfo -h -N -n {host} -o %t", timeout=20)
            if res.stdout.strip() in ("idle", "mix", "alloc"):
                return
            time.sleep(0.5)
        raise AssertionError(f"{host}'s slurmd did not come back within {seconds:g} s")

    def squeue(self) -> list[str]:
        """The jobs slurm knows of, one ``<id> <state> <name>`` line each."""
        res = self.run(self.login, "squeue -h -o '%i %t %j'", check=True, timeout=20)
        return [line for line in res.stdout.splitlines() if line.strip()]


def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "the lab needs root (network namespaces, a bridge, daemons as root)"
    probe = subprocess.run(["unshare", "--net", "--mount", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"this kernel refuses namespaces: {probe.stderr.strip()}"
    return None


def lab_up() -> Lab:
    res = subprocess.run(["bash", str(SCRIPT), "up"], capture_output=True, text=True, timeout=600)
    if res.returncode != 0:
        raise RuntimeError(f"scripts/lab-nodes.sh up failed ({res.returncode}):\n{res.stderr[-2000:]}")
    return Lab(ssh_config=Path(res.stdout.strip().splitlines()[-1]))


def lab_down() -> None:
    subprocess.run(["bash", str(SCRIPT), "down"], check=True, capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="session")
def lab() -> Iterator[Lab]:
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    up = lab_up()
    try:
        yield up
    finally:
        lab_down()
        left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        assert NETNS_PREFIX not in left, f"lab-nodes.sh down left namespaces: {left}"

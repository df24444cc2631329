"""The OpenSSH connection layer against a real sshd on loopback: a master that
makes later commands fast, quoting that survives hostile arguments, and one
clear line for each way a connection fails."""

from __future__ import annotations

import subprocess

import pytest

from trainium_lens.errors import TargetError
from trainium_lens.targets.ssh.conn import SshConnection

pytestmark = pytest.mark.ssh


def test_later_commands_go_through_the_master(sshd, ssh_control_dir):
    # What makes them fast (no TCP, key exchange or login each): how fast is
    # bench/ssh_bench.py's to measure, side by side.
    conn = SshConnection("lens-test", ssh_config=str(sshd.config))
    before = sshd.logins()
    conn.master()
    assert list(ssh_control_dir.iterdir()), "no control socket was created"
    assert sshd.logins() == before + 1
    for _ in range(3):
        assert conn.run("true").returncode == 0
    assert sshd.logins() == before + 1, "a command opened a connection of its own"
    conn.close()
    assert not conn._master_alive()


def test_arguments_reach_the_remote_verbatim(sshd, ssh_control_dir, tmp_path):
    conn = SshConnection("lens-test", ssh_config=str(sshd.config))
    hostile = [
        "a b",
        "it's",
        '"dq"',
        "$(touch pwned)",
        "`touch pwned`",
        "; touch pwned",
        "ünï©ødé ✓",
        "*",
        "-n",
        "",
    ]
    out = conn.run('for a in "$@"; do printf "%s\\0" "$a"; done', hostile)
    assert out.stdout.decode().split("\0")[:-1] == hostile
    assert not list(tmp_path.glob("**/pwned"))
    assert not (sshd.home / "pwned").exists()


@pytest.mark.parametrize(
    "alias, words",
    [
        ("lens-badauth", "authentication failed"),
        ("lens-unknown", "host key not known"),
        ("lens-changed", "host key has CHANGED"),
        ("lens-refused", "connection refused"),
        ("no-such-host.invalid", "does not resolve"),
    ],
)
def test_each_failure_is_one_clear_line(sshd, ssh_control_dir, alias, words):
    conn = SshConnection(alias, ssh_config=str(sshd.config))
    with pytest.raises(TargetError) as info:
        conn.master()
    message = str(info.value)
    assert words in message
    assert "\n" not in message
    assert message.startswith(alias)


def test_changed_key_is_refused_even_if_the_users_config_says_accept_new(sshd, ssh_control_dir, tmp_path):
    # A user's config that weakens checking must not weaken ours.
    config = tmp_path / "config"
    config.write_text(
        sshd.config.read_text().replace(
            "Host lens-changed\n", "Host lens-changed\n  StrictHostKeyChecking no\n"
        )
    )
    with pytest.raises(TargetError, match="CHANGED"):
        SshConnection("lens-changed", ssh_config=str(config)).master()
    config.write_text(
        sshd.config.read_text().replace(
            "Host lens-unknown\n", "Host lens-unknown\n  StrictHostKeyChecking accept-new\n"
        )
    )
    with pytest.raises(TargetError, match="not known"):
        SshConnection("lens-unknown", ssh_config=str(config)).master()
    assert (sshd.root / "known_hosts_empty").read_text() == ""


def test_bad_host_names_are_refused_before_ssh_runs(tmp_path):
    for bad in ["-oProxyCommand=touch pwned", "two words", ""]:
        with pytest.raises(TargetError):
            SshConnection(bad)
    with pytest.raises(TargetError, match="no such SSH config"):
        SshConnection("h", ssh_config=str(tmp_path / "missing"))
    assert subprocess.run(["ls", str(tmp_path)], capture_output=True).stdout == b""


@pytest.mark.parametrize(
    "stderr, kind",
    [
        # ssh's own words for failures loopback cannot produce (no routes to break here)
        ("ssh: connect to host 10.1.2.3 port 22: Connection timed out\r\n", "timeout"),
        ("ssh: connect to host 10.1.2.3 port 22: No route to host\r\n", "unreachable"),
        ("ssh: connect to host 10.1.2.3 port 22: Network is unreachable\r\n", "unreachable"),
        ("kex_exchange_identification: read: Connection reset by peer\r\n", "closed"),
        ("Received disconnect from 10.1.2.3 port 22:2: Too many authentication failures\r\n", "auth"),
    ],
)
def test_failures_loopback_cannot_produce_are_classified(stderr, kind):
    from trainium_lens.targets.ssh.conn import classify_ssh_failure, explain_ssh_failure

    assert classify_ssh_failure(stderr) == kind
    message = explain_ssh_failure("trn", stderr)
    assert message.startswith("trn: ") and "\n" not in message


def test_extra_options_go_first_so_they_win(tmp_path):
    """ssh keeps the first value it sees of an option: the tunnel's own
    ``ControlPath=none`` (through ``argv(extra=)``) must precede the shared
    master's socket, or the forward would ride, and outlive us on, the master."""
    from trainium_lens.hosttools.tunnel import Forward, Tunnel

    conn = SshConnection("h", control_path_dir=tmp_path)
    argv = conn.argv("true", extra=["-o", "ControlPath=none"])
    paths = [a for a in argv if a.startswith("ControlPath=")]
    assert paths == ["ControlPath=none", f"ControlPath={conn.control_path()}"]
    assert argv[:3] == ["ssh", "-o", "ControlPath=none"] and argv[-2:-1] == ["h"]

    tunnel = Tunnel(conn, [Forward(4001, 3001, "UI", "hint"), Forward(4002, 3002, "API", "hint")])
    argv = tunnel.argv()
    assert argv.index("ControlPath=none") < argv.index(f"ControlPath={conn.control_path()}")
    assert argv.index("-L") < argv.index("--") and argv[argv.index("--") + 1] == "h"
    assert "127.0.0.1:4001:127.0.0.1:3001" in argv and "127.0.0.1:4002:127.0.0.1:3002" in argv
    assert argv[-1] == "sh -c 'exec cat >/dev/null' sh"

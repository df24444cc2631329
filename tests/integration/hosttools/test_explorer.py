"""Neuron Explorer through an SSH tunnel, against a real sshd on loopback.

The real ``neuron-explorer`` cannot be installed here, so a STAND-IN plays it
on the "host": a small Python script installed as ``neuron-explorer`` that
implements the two documented calls we make (docs/explorer.md): ``view``
(serves a UI port and an API port) and ``view -d DIR --ingest-only
--display-name NAME`` (records the ingest). Everything else is real: sshd, the
ssh client, the ControlMaster, the tunnel, the ports, HTTP through the tunnel.

The runs are results written through the store by the test (artifacts on the
host, a Neuron profile directory created by the test), because a Neuron
profile cannot be produced without a Trainium device.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from trainium_lens.errors import UsageError
from trainium_lens.hosttools.explorer.service import ExplorerError, ExplorerService, display_name
from trainium_lens.hosttools.explorer.settings import ExplorerSettings, profile_url
from trainium_lens.model.lines import LineStat
from trainium_lens.model.result import Artifacts, FunctionRef, LineWindows, Result, Totals, Window
from trainium_lens.model.store import RunStore

pytestmark = pytest.mark.ssh

STANDIN = '''\
#!{python}
"""STAND-IN for neuron-explorer (tests only; the real binary cannot be installed here).

view                                         serve the UI (port {ui}) and API (port {api})
view -d DIR --ingest-only --display-name N   record an ingest of DIR as N
view -n NEFF -s NTFF --ingest-only ...       record an ingest of a device profile
     [--framework-source-root ROOT]          (recorded too)
"""
import http.server, json, os, sys, threading
STATE = {state!r}
args = sys.argv[1:]
if args[:1] != ["view"]:
    sys.exit("stand-in: only `view` is implemented")
if "--ingest-only" in args:
    opt = lambda flag: args[args.index(flag) + 1] if flag in args else None
    folder, name = opt("-d"), opt("--display-name")
    if folder is not None and not os.path.isfile(os.path.join(folder, "trace_info.pb")):
        sys.exit(f"stand-in: {{folder}} has no trace_info.pb")
    for f in (opt("-n"), opt("-s")):
        if folder is None and not (f and os.path.isfile(f)):
            sys.exit(f"stand-in: -n NEFF -s NTFF (files) or -d DIR, got {{args}}")
    with open(os.path.join(STATE, "ingests.jsonl"), "a") as fh:
        fh.write(json.dumps({{"name": name, "dir": folder, "neff": opt("-n"), "ntff": opt("-s"),
                             "source_root": opt("--framework-source-root")}}) + "\\n")
    sys.exit(0)

def ingested():
    try:
        with open(os.path.join(STATE, "ingests.jsonl")) as fh:
            return [json.loads(line)["name"] for line in fh]
    except OSError:
        return []

class UI(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        name = self.path.split("?")[0].rsplit("/", 1)[-1]
        ok = self.path.startswith("/profile/") and name in ingested()
        page = f"<title>Neuron Explorer stand-in</title>profile {{name}}" if ok else "no such profile"
        body = page.encode()
        self.send_response(200 if ok else 404)
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a): pass

class API(UI):
    def do_GET(self):
        body = json.dumps({{"profiles": ingested()}}).encode()
        self.send_response(200)
        self.end_headers()
        self.wfile.write(body)

servers = [http.server.ThreadingHTTPServer(("127.0.0.1", p), h) for p, h in (({ui}, UI), ({api}, API))]
with open(os.path.join(STATE, "starts.log"), "a") as fh:
    fh.write(f"{{os.getpid()}} sid={{os.getsid(0)}}\\n")
threading.Thread(target=servers[0].serve_forever, daemon=True).start()
servers[1].serve_forever()
'''


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        return True
    except OSError:
        return False


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, ""


def wait_closed(port: int, timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not listening(port):
            return True
        time.sleep(0.1)
    return False


class StandIn:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.state = root / "state"
        self.state.mkdir(parents=True)
        self.ui, self.api = free_port(), free_port()
        self.bin = root / "bin"
        self.bin.mkdir()
        self.exe = self.bin / "neuron-explorer"
        self.exe.write_text(
            STANDIN.format(python=sys.executable, ui=self.ui, api=self.api, state=str(self.state))
        )
        self.exe.chmod(0o755)

    def starts(self) -> list[str]:
        path = self.state / "starts.log"
        return path.read_text().splitlines() if path.exists() else []

    def ingests(self) -> list[dict]:
        path = self.state / "ingests.jsonl"
        return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []

    def stop(self) -> None:
        for line in self.starts():
            try:
                os.kill(int(line.split()[0]), signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.fixture
def standin(tmp_path):
    s = StandIn(tmp_path / "standin")
    yield s
    s.stop()


def make_run(
    store: RunStore, host: str, host_root: Path, run_id: str, func: str, profile: bool = True
) -> Result:
    """A stored run whose artifacts are on ``host``: its work dir, run dir and a
    Neuron profile directory (created here: no Trainium device to make one)."""
    run_dir = host_root / "work" / "runs" / run_id.rsplit("-", 1)[0]
    prof = run_dir / "neuron_profile" / "i-0_pid_1"
    if profile:
        prof.mkdir(parents=True, exist_ok=True)
        (prof / "trace_info.pb").write_bytes(b"stand-in")
    result = Result(
        run_id=run_id,
        created_at="2026-11-29T10:00:00Z",
        backend="neuron",
        clock="neuron",
        host=host,
        function=FunctionRef(file="examples/rmsnorm.py", name=func, line=13),
        totals=Totals(self_time_us=2355.0, self_cpu_us=900.0, wall_us_median=2500.0, steps=5),
        artifacts=Artifacts(
            location=host, run_dir=str(run_dir), neuron_profile_dir=str(prof) if profile else None
        ),
        timeline=[
            LineWindows("examples/rmsnorm.py", 16, [Window(1000.5, 20.0), Window(1500.0, 30.25)]),
            LineWindows("examples/rmsnorm.py", 23, [Window(2000.0, 5.0)]),
        ],
        lines=[
            LineStat(
                "examples/rmsnorm.py",
                23,
                900.0,
                900.0,
                400.0,
                2.0,
                text="mean = x2.mean(-1, keepdim=True)",
                function=func,
            )
        ],
    )
    store.save(result)
    return store.get(run_id)  # what the editor and the CLI read back


def settings_for(standin: StandIn, sshd=None, **kw) -> ExplorerSettings:
    return ExplorerSettings(
        ui_port=standin.ui,
        api_port=standin.api,
        local_ui_port=kw.pop("local_ui", free_port()),
        local_api_port=kw.pop("local_api", free_port()),
        binary=kw.pop("binary", str(standin.exe)),
        ssh_config=str(sshd.config) if sshd else None,
        **kw,
    )


def test_explorer_over_ssh_starts_once_ingests_once_and_tunnels_both_ports(
    sshd, ssh_control_dir, standin, tmp_path
):
    store = RunStore(tmp_path / "ws")
    first = make_run(store, "lens-test", sshd.home, "20261129-100000-aaaa-0", "rms_norm_naive")
    second = make_run(store, "lens-test", sshd.home, "20261129-100000-aaaa-1", "rms_norm_fused")
    s = settings_for(standin, sshd)
    service = ExplorerService(s)
    try:
        opened = service.open(first, line=16)
        assert (opened.server, opened.ingested, opened.tunnel) == ("started", True, "opened")
        name = "rmsnorm-rms_norm_naive-20261129-100000-aaaa-0"
        assert opened.profile == name
        assert opened.url == f"http://localhost:{s.local_ui_port}/profile/{name}"
        assert opened.window_ns == (1000500, 1530250)
        # The page answers here, through the tunnel; so does the API it calls.
        status, body = get(opened.url)
        assert status == 200 and f"profile {name}" in body
        assert json.loads(get(f"http://127.0.0.1:{s.local_api_port}/api/profiles")[1]) == {"profiles": [name]}
        # Started detached: it outlived the SSH session that started it, in its own session.
        starts = standin.starts()
        assert len(starts) == 1
        pid, sid = starts[0].split()
        assert sid == f"sid={pid}"
        assert (sshd.home / "work" / "explorer" / "explorer.log").exists()
        # Both forwards listen on 127.0.0.1 only.
        for port in (s.local_ui_port, s.local_api_port):
            assert _listen_addresses(port) == {"127.0.0.1"}
        [tunnel] = service.tunnels()
        tunnel_pid = tunnel.proc.pid

        again = service.open(first, line=16)
        assert (again.server, again.ingested, again.tunnel) == ("running", False, "reused")
        other = service.open(second)
        assert (other.server, other.ingested, other.tunnel) == ("running", True, "reused")
        assert other.window_ns is None
        assert service.tunnels()[0].proc.pid == tunnel_pid
        assert len(standin.starts()) == 1
        assert [i["name"] for i in standin.ingests()] == [name, display_name(second)]
        assert get(other.url)[0] == 200
    finally:
        service.close()
    assert wait_closed(s.local_ui_port) and wait_closed(s.local_api_port)
    assert listening(standin.ui)  # Explorer itself keeps serving on the host
    # A new service (a restarted server) reuses the running Explorer and the ingest.
    service = ExplorerService(s)
    try:
        opened = service.open(first)
        assert (opened.server, opened.ingested, opened.tunnel) == ("running", False, "opened")
    finally:
        service.close()


def _listen_addresses(port: int) -> set[str]:
    found = set()
    for row in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        cols = row.split()
        addr, p = cols[1].split(":")
        if cols[3] == "0A" and int(p, 16) == port:
            found.add(socket.inet_ntoa(bytes.fromhex(addr)[::-1]))
    for row in Path("/proc/net/tcp6").read_text().splitlines()[1:]:
        cols = row.split()
        if cols[3] == "0A" and int(cols[1].split(":")[1], 16) == port:
            found.add("ipv6:" + cols[1].split(":")[0])
    return found


def test_busy_local_port_says_which_port_and_which_process(sshd, ssh_control_dir, standin, tmp_path):
    store = RunStore(tmp_path / "ws")
    run = make_run(store, "lens-test", sshd.home, "20261129-100000-bbbb-0", "rms_norm_naive")
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        busy = squatter.getsockname()[1]
        service = ExplorerService(settings_for(standin, sshd, local_api=busy))
        with pytest.raises(ExplorerError) as err:
            service.open(run)
        service.close()
    message = str(err.value)
    assert f"local port {busy}" in message and "API" in message
    assert f"pid {os.getpid()}" in message and "python" in message
    assert "\n" not in message


def test_tunnel_closes_when_the_process_that_opened_it_dies(sshd, ssh_control_dir, standin, tmp_path):
    """Even a SIGKILLed server leaves no tunnel behind: the CLI, killed hard."""
    store = RunStore(tmp_path / "ws")
    run = make_run(store, "lens-test", sshd.home, "20261129-100000-cccc-0", "rms_norm_naive")
    lui, lapi = free_port(), free_port()
    cli = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "trainium_lens",
            "explorer",
            run.run_id,
            "--line",
            "16",
            "--workspace",
            str(store.workspace),
            "--ssh-config",
            str(sshd.config),
            "--explorer-path",
            str(standin.exe),
            "--ui-port",
            str(standin.ui),
            "--api-port",
            str(standin.api),
            "--local-ui-port",
            str(lui),
            "--local-api-port",
            str(lapi),
            "--no-browser",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = cli.stdout.readline().strip()
        assert url == f"http://localhost:{lui}/profile/{display_name(run)}", cli.stderr.read()
        assert get(url)[0] == 200
        cli.kill()
        cli.wait(timeout=10)
        assert wait_closed(lui) and wait_closed(lapi)
    finally:
        if cli.poll() is None:
            cli.kill()


def test_cli_closes_the_tunnel_on_ctrl_c(sshd, ssh_control_dir, standin, tmp_path):
    store = RunStore(tmp_path / "ws")
    run = make_run(store, "lens-test", sshd.home, "20261129-100000-dddd-0", "rms_norm_naive")
    lui, lapi = free_port(), free_port()
    cli = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "trainium_lens",
            "explorer",
            run.run_id[:20],
            "--workspace",
            str(store.workspace),
            "--ssh-config",
            str(sshd.config),
            "--explorer-path",
            str(standin.exe),
            "--ui-port",
            str(standin.ui),
            "--api-port",
            str(standin.api),
            "--local-ui-port",
            str(lui),
            "--local-api-port",
            str(lapi),
            "--no-browser",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = cli.stdout.readline().strip()
    assert get(url)[0] == 200
    cli.send_signal(signal.SIGINT)
    assert cli.wait(timeout=15) == 0
    assert "Explorer started" in cli.stderr.read()
    assert not listening(lui) and not listening(lapi)


def test_local_run_needs_no_tunnel_and_finds_explorer_on_path(standin, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", f"{standin.bin}{os.pathsep}{os.environ['PATH']}")
    store = RunStore(tmp_path / "ws")
    run = make_run(store, "local", tmp_path / "host", "20261129-100000-eeee-0", "rms_norm_naive")
    service = ExplorerService(settings_for(standin, binary=""))
    try:
        opened = service.open(run, line=16)
        assert opened.tunnel == "none" and service.tunnels() == []
        assert opened.url == f"http://localhost:{standin.ui}/profile/{display_name(run)}"
        assert get(opened.url)[0] == 200
        assert len(standin.ingests()) == 1
    finally:
        service.close()


def test_missing_explorer_and_missing_profile_are_clear_errors(standin, tmp_path):
    store = RunStore(tmp_path / "ws")
    run = make_run(store, "local", tmp_path / "host", "20261129-100000-ffff-0", "f")
    service = ExplorerService(settings_for(standin, binary=str(tmp_path / "nope")))
    with pytest.raises(ExplorerError, match="neuron-explorer is not installed on this host"):
        service.open(run)
    cpu = make_run(store, "local", tmp_path / "host", "20261129-100000-ffff-1", "g", profile=False)
    with pytest.raises(ExplorerError, match="has no Neuron profile.*built-in timeline"):
        ExplorerService(settings_for(standin)).open(cpu)
    assert standin.starts() == []  # nothing was started for either


def test_url_template_takes_the_line_window():
    template = "http://localhost:{port}/profile/{profile}?start={start_ns}&end={end_ns}&x=1"
    assert (
        profile_url(template, 3001, "a b", (5, 9)) == "http://localhost:3001/profile/a%20b?start=5&end=9&x=1"
    )
    assert profile_url(template, 3001, "p", None) == "http://localhost:3001/profile/p?x=1"
    with pytest.raises(UsageError, match="bad Explorer URL template"):
        profile_url("http://x/{nope}", 1, "p", None)


async def test_language_server_opens_the_line_in_explorer_and_closes_the_tunnel_on_exit(
    sshd, ssh_control_dir, standin, tmp_path
):
    """trainiumLens.openExplorer from the editor: window/showDocument (external) with
    the run's URL and the line's window; the tunnel goes when the server goes."""
    from lsprotocol import types

    from tests.conftest import EXAMPLES
    from tests.support.lsp_client import open_doc, start, stop

    ws = tmp_path / "ws"
    (ws / "examples").mkdir(parents=True)
    (ws / "examples" / "rmsnorm.py").write_text((EXAMPLES / "rmsnorm.py").read_text())
    run = make_run(RunStore(ws), "lens-test", sshd.home, "20261129-100000-abab-0", "rms_norm_naive")
    lui, lapi = free_port(), free_port()
    template = "http://localhost:{port}/profile/{profile}?start={start_ns}&end={end_ns}"
    client = await start(
        ws,
        {
            "trainiumLens": {
                "sshConfig": str(sshd.config),
                "explorer": {
                    "uiPort": standin.ui,
                    "apiPort": standin.api,
                    "localUiPort": lui,
                    "localApiPort": lapi,
                    "path": str(standin.exe),
                    "urlTemplate": template,
                },
            }
        },
    )
    try:
        uri = open_doc(client, ws / "examples" / "rmsnorm.py")
        reply = await client.workspace_execute_command_async(
            types.ExecuteCommandParams(
                command="trainiumLens.openExplorer", arguments=[{"uri": uri, "line": 22}]
            )
        )
        url = f"http://localhost:{lui}/profile/{display_name(run)}?start=2000000&end=2005000"
        assert reply["url"] == url and reply["shown"] is True, reply
        assert [(p.uri, p.external) for p in client.shown_documents] == [(url, True)]
        assert get(url)[0] == 200
        again = await client.workspace_execute_command_async(
            types.ExecuteCommandParams(
                command="trainiumLens.openExplorer", arguments=[{"uri": uri, "line": 22}]
            )
        )
        assert (again["tunnel"], again["ingested"]) == ("reused", False)
    finally:
        await stop(client)
    assert wait_closed(lui) and wait_closed(lapi)


def test_a_trn1_xla_run_opens_its_neff_and_ntff_with_the_source_root(
    sshd, ssh_control_dir, standin, tmp_path
):
    """An xla run from Trn1 (stand-in capture files on the 'host'): Explorer ingests its
    NEFF/NTFF as a device profile, with --framework-source-root the synced workspace."""
    from trainium_lens.model.result import NeuronView

    store = RunStore(tmp_path / "ws")
    run = make_run(store, "lens-test", sshd.home, "20261129-100000-ffff-0", "rms_norm_naive", profile=False)
    inspect = Path(run.artifacts.run_dir) / "neuron-inspect"
    inspect.mkdir(parents=True)
    neff, ntff = inspect / "neff_1234567.neff", inspect / "1234567_instid_0_vnc_0.ntff"
    neff.write_bytes(b"stand-in NEFF")
    ntff.write_bytes(b"stand-in NTFF")
    run.backend = "xla"
    run.artifacts.neuron_profile_dir = str(inspect)
    run.artifacts.source_root = str(sshd.home / "work" / "src")
    run.artifacts.neuron_views = [NeuronView(str(neff), str(ntff), str(inspect / "view"))]
    service = ExplorerService(settings_for(standin, sshd))
    try:
        opened = service.open(run)
        assert (opened.ingested, opened.tunnel) == (True, "opened")
        assert get(opened.url)[0] == 200  # through the tunnel
        [ingest] = standin.ingests()
        assert ingest == {
            "name": display_name(run),
            "dir": None,
            "neff": str(neff),
            "ntff": str(ntff),
            "source_root": str(sshd.home / "work" / "src"),
        }
        ntff.unlink()  # a later, not yet ingested run whose trace is gone: one clear line
        run.run_id = "20261129-100000-ffff-1"
        with pytest.raises(ExplorerError, match="device profile file is gone: .*ntff"):
            service.open(run)
    finally:
        service.close()

"""Open a run in Neuron Explorer: on the host that holds its profile, via one tunnel.

``ExplorerService.open(result, line)`` returns the URL to open:

1. on the run's host (``artifacts.location``), in one round trip over the SSH
   target's ControlMaster (or a local ``sh`` for local runs), ``HOST_SCRIPT``
   finds ``neuron-explorer``, starts ``neuron-explorer view`` detached when
   nothing answers on its API port (so it outlives the SSH session and serves
   every later run), and ingests the run's Neuron profile directory once under
   a readable display name, remembering it in ``<work dir>/explorer/ingested``;
2. for a remote host, ONE ``ssh -L ... -L ...`` process forwards both the UI and
   the API port (the UI page calls the API; with only the UI port it loads
   empty), bound to 127.0.0.1, reused while alive, closed by ``close()`` or
   when this process dies (see ``Tunnel``);
3. the URL comes from a template with ``{port}``, ``{profile}``, ``{start_ns}``
   and ``{end_ns}``: Explorer's deep-link parameters are undocumented, so only
   the documented ``/profile/<name>`` is in the default.

Everything Explorer-specific is in ``HOST_SCRIPT`` and ``ExplorerSettings``,
written against AWS Neuron SDK documentation (docs/timeline.md, "Neuron Explorer"): the binary at
``/opt/aws/neuron/bin/neuron-explorer``, ``view`` serving UI 3001 + API 3002,
``view -d DIR --ingest-only --display-name NAME``, ``/profile/<display-name>``.
"""

from __future__ import annotations

import re
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from trainium_lens.errors import LensError, TargetError
from trainium_lens.hosttools.explorer.host_script import HOST_SCRIPT, MARK
from trainium_lens.hosttools.explorer.settings import ExplorerSettings, profile_url
from trainium_lens.hosttools.tunnel import Forward, Tunnel, TunnelError
from trainium_lens.model.result import Result
from trainium_lens.targets.ssh.conn import SshConnection


class ExplorerError(LensError):
    exit_code = 4


def display_name(result: Result) -> str:
    """``<file>-<function>-<run_id>``, safe in a URL path and a shell word."""
    stem = PurePosixPath(result.function.file).stem or "run"
    raw = f"{stem}-{result.function.name}-{result.run_id}"
    return re.sub(r"[^A-Za-z0-9._-]+", "_", raw)


def line_window(result: Result, line: int | None) -> tuple[int, int] | None:
    """The line's events' span in trace time (ns), when the result has it."""
    if line is None:
        return None
    windows = [
        w for lw in result.timeline if lw.line == line and lw.file == result.function.file for w in lw.windows
    ]
    if not windows:
        return None
    start = min(w.start_us for w in windows)
    end = max(w.start_us + w.dur_us for w in windows)
    return int(round(start * 1000)), int(round(end * 1000))


def state_dir(result: Result) -> str:
    """``<work dir>/explorer`` on the run's host (the run dir is ``<wd>/runs/<batch>``)."""
    run_dir = PurePosixPath(result.artifacts.run_dir or "")
    if run_dir.is_absolute() and run_dir.parent.name == "runs":
        return str(run_dir.parent.parent / "explorer")
    if result.artifacts.location in ("", "local"):
        return str(Path.home() / ".cache" / "trainium-lens" / "explorer")
    return ""  # the host's default, under its $HOME (see HOST_SCRIPT)


# -- the service --------------------------------------------------------------


@dataclass
class Opened:
    url: str
    profile: str
    host: str
    server: str  # "started" | "running"
    ingested: bool  # ingested by this call (False: done before)
    tunnel: str  # "opened" | "reused" | "none"
    window_ns: tuple[int, int] | None


class ExplorerService:
    """One per language server (or CLI call): tunnels per host, closed by ``close()``."""

    def __init__(
        self,
        settings: ExplorerSettings | None = None,
        connection_factory: Callable[[str], SshConnection] | None = None,
    ) -> None:
        self.settings = settings or ExplorerSettings()
        self._connection_factory = connection_factory
        self._tunnels: dict[tuple, Tunnel] = {}
        self._connections: dict[
            tuple, SshConnection
        ] = {}  # (host, ssh config) -> its connection, closed by close()
        self._lock = threading.Lock()

    def _connection(self, host: str) -> SshConnection:
        key = (host, self.settings.ssh_config)
        conn = self._connections.get(key)
        if conn is None:
            if self._connection_factory:
                conn = self._connection_factory(host)
            else:
                conn = SshConnection(host, ssh_config=self.settings.ssh_config)
            self._connections[key] = conn
        return conn

    def open(self, result: Result, line: int | None = None) -> Opened:
        """Serve, ingest and tunnel as needed; the URL of the run (at ``line``, 1-based)."""
        s = self.settings
        art = result.artifacts
        if not art.neuron_profile_dir:
            raise ExplorerError(
                f"run {result.run_id} ({result.backend}) has no Neuron profile: "
                f"Neuron Explorer shows Trainium runs; use the built-in "
                f"timeline (Open Timeline for Line) for this one"
            )
        name = display_name(result)
        host = art.location or "local"
        local = host == "local"
        with self._lock:
            conn = None if local else self._connection(host)
            info = self._on_host(conn, result, name)
            tunnel_state = "none"
            port = s.ui_port
            if not local:
                assert conn is not None  # made above: the host is not local
                tunnel_state = self._ensure_tunnel(host, conn)
                port = s.local_ui_port
        window = line_window(result, line)
        return Opened(
            profile_url(s.url_template, port, name, window),
            name,
            host,
            info.get("server", "?"),
            info.get("ingest") == "now",
            tunnel_state,
            window,
        )

    def _on_host(self, conn: SshConnection | None, result: Result, name: str) -> dict:
        s = self.settings
        state = state_dir(result)
        art = result.artifacts
        # xla on Trn1: the first captured NEFF/NTFF pair, as a device profile
        pair = next((v for v in art.neuron_views if v.neff and v.ntff), None)
        args = [
            state,
            str(s.api_port),
            s.binary,
            art.neuron_profile_dir or "",
            name,
            str(int(s.start_timeout_s)),
            art.source_root or "",
            (pair.neff or "") if pair else "",
            (pair.ntff or "") if pair else "",
        ]
        script = HOST_SCRIPT
        timeout = s.start_timeout_s + s.ingest_timeout_s + 30
        try:
            if conn is None:
                proc = subprocess.run(
                    ["sh", "-c", script, "sh", *args],
                    capture_output=True,
                    stdin=subprocess.DEVNULL,
                    timeout=timeout,
                )
            else:
                proc = conn.run(script, args, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise ExplorerError(f"neuron-explorer did not finish in {timeout:.0f} s") from None
        except TargetError as err:
            raise ExplorerError(str(err)) from None
        stderr = proc.stderr.decode("utf-8", "replace")
        where = "" if conn is None else f"{conn.host}: "
        if proc.returncode != 0:
            reason = next(
                (ln.split(MARK, 1)[1] for ln in reversed(stderr.splitlines()) if MARK in ln),
                stderr.strip().splitlines()[-1:] or ["failed"],
            )
            raise ExplorerError(where + (reason if isinstance(reason, str) else reason[0]))
        info = {}
        for ln in proc.stdout.decode("utf-8", "replace").splitlines():
            key, _, value = ln.partition("=")
            info[key] = value
        return info

    def _ensure_tunnel(self, host: str, conn: SshConnection) -> str:
        s = self.settings
        key = (host, s.ssh_config, s.local_ui_port, s.ui_port, s.local_api_port, s.api_port)
        tunnel = self._tunnels.get(key)
        if tunnel and tunnel.alive():
            return "reused"
        if tunnel:
            tunnel.close()
        tunnel = Tunnel(
            conn,
            [
                Forward(
                    s.local_ui_port,
                    s.ui_port,
                    "Neuron Explorer UI",
                    "set trainiumLens.explorer.localUiPort / --local-ui-port",
                ),
                Forward(
                    s.local_api_port,
                    s.api_port,
                    "Neuron Explorer API",
                    "set trainiumLens.explorer.localApiPort / --local-api-port",
                ),
            ],
        )
        try:
            tunnel.start()
        except TunnelError as err:
            raise ExplorerError(str(err)) from None
        self._tunnels[key] = tunnel
        return "opened"

    def tunnels(self) -> list[Tunnel]:
        return list(self._tunnels.values())

    def close(self) -> None:
        """The tunnels, then our share of the SSH masters (stopped when no run
        or language server still uses them: targets/ssh/conn.py's reference count)."""
        with self._lock:
            for tunnel in self._tunnels.values():
                tunnel.close()
            self._tunnels.clear()
            for conn in self._connections.values():
                close = getattr(conn, "close", None)
                if close is not None:
                    try:
                        close()
                    except Exception:  # noqa: BLE001 - closing must not fail the caller
                        pass
            self._connections.clear()


def describe(opened: Opened) -> str:
    """One line for a status message or the terminal."""
    parts = [
        f"{opened.profile} on {opened.host}",
        "Explorer started" if opened.server == "started" else "Explorer already running",
        "ingested now" if opened.ingested else "ingested before",
    ]
    if opened.tunnel != "none":
        parts.append(f"tunnel {opened.tunnel}")
    return ", ".join(parts)


# -- settings (trainiumLens.explorer.*) ----------------------------------------

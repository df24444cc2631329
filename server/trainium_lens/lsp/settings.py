"""The server's settings (``trainiumLens.*``): typed, validated, with defaults.

They arrive as ``initializationOptions`` and later through
``workspace/didChangeConfiguration``, as the editor holds them: the client checks
nothing (extension/src/settings.ts), so every range and type is held here. A bad
value never stops the server: it is replaced by its default and reported in one
line naming the setting (modelled on jedi-language-server's initialization options). Settings that say *where*
code runs (``TARGET_SETTINGS``) are the exception: a rejected one never falls
back to its default (a rejected host would otherwise run the code on this
machine); it is kept in ``rejected`` and profiling is refused until it is fixed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from typing import Any

from trainium_lens.harness.spec import BACKENDS
from trainium_lens.hosttools.explorer.settings import SETTING_KEYS as EXPLORER_KEYS
from trainium_lens.hosttools.explorer.settings import ExplorerSettings
from trainium_lens.hosttools.explorer.settings import settings_from as explorer_settings_from
from trainium_lens.targets.where import NodeOptions, Where

SECTION = "trainiumLens"

PROTOCOL_KEYS = ("wait", "warmup", "active")
#: Where code runs: a rejected value refuses runs instead of falling back.
TARGET_SETTINGS = ("host", "sshConfig", "remotePython", "workDir", "python", "hosts", "slurm", "ifname")


@dataclass(frozen=True)
class Slurm:
    """``trainiumLens.slurm.*``: a job across nodes through SLURM from ``login``."""

    login: str | None = None
    nodes: int = 2
    partition: str | None = None


@dataclass(frozen=True)
class Threshold:
    """Hide hints below a share of the function (``share``) or a time (``us``)."""

    share: float = 0.0
    us: float = 0.0

    def passes(self, time_us: float, function_us: float) -> bool:
        if time_us <= 0:
            return False
        if self.us and time_us < self.us:
            return False
        if self.share and function_us > 0 and time_us / function_us < self.share:
            return False
        return True


@dataclass(frozen=True)
class Settings:
    host: str = "local"  # "local" or an SSH host as ~/.ssh/config names it
    ssh_config: str | None = None
    remote_python: str | None = None
    work_dir: str | None = None
    # Across nodes (docs/nodes.md): SSH hosts as one job's nodes, or a SLURM login host;
    # either takes the place of ``host``. ``ifname``: the nodes' cluster interface.
    hosts: tuple[str, ...] = ()
    slurm: Slurm = field(default_factory=Slurm)
    ifname: str | None = None
    backend: str = "auto"
    protocol: dict[str, int] = field(default_factory=dict)  # explicit overrides only
    hint_threshold: Threshold = field(default_factory=Threshold)
    history_size: int = 20
    timeout_seconds: float = 3600.0  # a first Neuron compile can take many minutes
    python: str | None = None  # interpreter for local runs (needs torch)
    include: tuple[str, ...] = ()  # packages whose lines get figures too (--include)
    # trainiumLens.warmWorker.idleSeconds: a warm worker per target ends after
    # this long without a job; 0: no warm worker (every run starts cold).
    warm_idle_seconds: float = 300.0
    nproc: int | None = None  # ranks under torchrun; None (setting 0): the marker's nproc=, else 1
    # trainiumLens.script.args: Profile Script's arguments when no launch.json configuration names the file.
    script_args: tuple[str, ...] = ()
    # Settings other features read unvalidated here (e.g. ``explorer``); not
    # part of equality, so they never restart a target.
    extra: dict[str, Any] = field(default_factory=dict, compare=False)
    explorer: ExplorerSettings = field(default_factory=ExplorerSettings)  # hosttools/explorer/service.py
    # Workspace Trust: False in VS Code's Restricted Mode, where nothing runs (lsp/workspace_trust.py).
    # The CLI and clients that do not say are trusted: their user runs them.
    trusted: bool = True
    # The TARGET_SETTINGS whose value was rejected, with the reason: no run until fixed.
    rejected: tuple[str, ...] = ()

    def where(self) -> Where:
        """Where runs happen, as the settings say (the server's one place that makes a
        ``Where``; a new one: a new target)."""
        across = bool(self.hosts or self.slurm.login)
        return Where(
            host=None if across else self.host,
            hosts=self.hosts,
            slurm=self.slurm.login,
            python=self.python,
            ssh_config=self.ssh_config,
            remote_python=self.remote_python,
            work_dir=self.work_dir,
            node=NodeOptions(
                ifname=self.ifname,
                nodes=self.slurm.nodes if self.slurm.login else None,
                partition=self.slurm.partition,
            ),
        )


# camelCase setting name -> (field name, parser); a parser returns the value or
# raises ValueError with the reason.
def _str_or_none(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError("expected a string")
    return value.strip() or None


def _host(value: Any) -> str:
    if value is None or value == "":
        return "local"
    if not isinstance(value, str):
        raise ValueError("expected a string: 'local' or an SSH host")
    value = value.strip()
    # An SSH destination never starts with '-' (it would read as an option) and
    # holds no whitespace or control characters.
    if value.startswith("-") or re.search(r"[\s\x00-\x1f]", value):
        raise ValueError(f"{value!r} is not a host name")
    return value


def _hosts(value: Any) -> tuple[str, ...]:
    """``trainiumLens.hosts``: SSH hosts, each once (none: not across nodes)."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ValueError("expected a list of SSH hosts")
    hosts = tuple(_host(v) for v in value if v not in (None, ""))
    if "local" in hosts:
        raise ValueError("'local' is no node: list SSH hosts")
    if len(set(hosts)) != len(hosts):
        raise ValueError("a host is listed twice")
    return hosts


def _slurm(value: Any) -> Slurm:
    """``{"login", "nodes", "partition"}`` as VS Code nests ``slurm.*``."""
    if value is None:
        return Slurm()
    if not isinstance(value, dict):
        raise ValueError("expected {login, nodes, partition}")
    login = _host(value.get("login"))
    return Slurm(
        login=None if login == "local" else login,
        nodes=_int_range(1, 4096)(value.get("nodes", 2)),
        partition=_str_or_none(value.get("partition")),
    )


def _backend(value: Any) -> str:
    if value in (None, ""):
        return "auto"
    if value not in BACKENDS:
        raise ValueError(f"{value!r} is not one of {', '.join(BACKENDS)}")
    return value


def _protocol(value: Any) -> dict[str, int]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError("expected an object with wait, warmup, active")
    out: dict[str, int] = {}
    for key, item in value.items():
        if key not in PROTOCOL_KEYS:
            raise ValueError(f"unknown key {key!r} (use wait, warmup, active)")
        if item is None:
            continue
        if isinstance(item, bool) or not isinstance(item, int):
            raise ValueError(f"{key} must be an integer")
        if item < (1 if key == "active" else 0):
            raise ValueError(f"{key} must be at least {1 if key == 'active' else 0}")
        out[key] = item
    return out


_TIME = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(%|us|µs|ms|s)?\s*$")


def _threshold(value: Any) -> Threshold:
    """A number <= 1 is a share of the function, above 1 a time in µs; strings
    may say so: ``"2%"``, ``"50us"``, ``"0.5ms"``."""
    if value is None or value == "":
        return Threshold()
    if isinstance(value, bool):
        raise ValueError("expected a number or a string like '2%' or '50us'")
    if isinstance(value, (int, float)):
        if value < 0:
            raise ValueError("must not be negative")
        return Threshold(share=float(value)) if value <= 1 else Threshold(us=float(value))
    if isinstance(value, str):
        match = _TIME.match(value)
        if match:
            number, unit = float(match.group(1)), match.group(2)
            if unit == "%":
                return Threshold(share=number / 100)
            scale = {"ms": 1e3, "s": 1e6}.get(unit or "us", 1.0)
            return Threshold(us=number * scale)
    raise ValueError(f"{value!r}: use a share (0.02), a percentage ('2%') or a time ('50us')")


def _int_range(low: int, high: int) -> Callable[[Any], int]:
    def parse(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError("expected an integer")
        if not low <= value <= high:
            raise ValueError(f"must be between {low} and {high}")
        return value

    return parse


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError("expected true or false")
    return value


def _nproc(value: Any) -> int | None:
    """``trainiumLens.nproc``: 0 leaves it to the marker's ``nproc=`` (else 1 rank)."""
    return _int_range(0, 4096)(value) or None


def _seconds(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError("expected a number of seconds")
    if value <= 0:
        raise ValueError("must be positive")
    return float(value)


def _warm_worker(value: Any) -> float:
    """``{"idleSeconds": N}`` as VS Code nests ``warmWorker.idleSeconds`` (a bare
    number is accepted too)."""
    if isinstance(value, dict):
        if "idleSeconds" not in value:
            return 300.0
        value = value["idleSeconds"]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError("idleSeconds must be a number of seconds (0: no warm worker)")
    if value < 0:
        raise ValueError("idleSeconds must not be negative (0: no warm worker)")
    return float(value)


_PARSERS = {
    "host": ("host", _host),
    "sshConfig": ("ssh_config", _str_or_none),
    "remotePython": ("remote_python", _str_or_none),
    "workDir": ("work_dir", _str_or_none),
    "hosts": ("hosts", _hosts),
    "slurm": ("slurm", _slurm),
    "ifname": ("ifname", _str_or_none),
    "backend": ("backend", _backend),
    "protocol": ("protocol", _protocol),
    "hintThreshold": ("hint_threshold", _threshold),
    "historySize": ("history_size", _int_range(1, 10_000)),
    "timeoutSeconds": ("timeout_seconds", _seconds),
    "python": ("python", _str_or_none),
    "warmWorker": ("warm_idle_seconds", _warm_worker),
    "nproc": ("nproc", _nproc),
    "explorer": ("explorer", explorer_settings_from),
    "trusted": ("trusted", _bool),
    "include": ("include", lambda value: _include(value)),
    "script": ("script_args", lambda value: _script_args(value)),
}


def _script_args(value: Any) -> tuple[str, ...]:
    """``{"args": [...]}`` as VS Code nests ``script.args``."""
    if isinstance(value, dict):
        value = value.get("args", [])
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError("args must be a list of strings (one per argument)")
    return tuple(value)


def _include(value: Any) -> tuple[str, ...]:
    if value is None or value == "":
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError("expected a list of package names")
    value = [v.strip() for v in value if v.strip()]  # the editor's list as typed
    bad = [v for v in value if not v or not all(p.isidentifier() for p in v.split("."))]
    if bad:
        raise ValueError(f"{bad[0]!r} is not a dotted package name")
    return tuple(dict.fromkeys(value))


def section_of(payload: Any) -> dict | None:
    """The ``trainiumLens`` section from either a nested or a flat payload."""
    if not isinstance(payload, dict):
        return None
    if isinstance(payload.get("settings"), dict):  # {settings: {trainiumLens: ...}}
        return section_of(payload["settings"])
    nested = payload.get(SECTION)
    if isinstance(nested, dict):
        return nested
    if any(key in _PARSERS or key in PROTOCOL_KEYS for key in payload):
        return payload
    return None


def parse(payload: Any) -> tuple[Settings, list[str]]:
    """Settings from a client payload, and one warning per rejected value."""
    section = section_of(payload) or {}
    defaults = Settings()
    values: dict[str, Any] = {}
    warnings: list[str] = []
    rejected: list[str] = []
    # VS Code's flat form ``trainiumLens.wait`` is accepted beside ``protocol``.
    flat = {k: section[k] for k in PROTOCOL_KEYS if k in section}
    if flat:
        section = {**section, "protocol": {**flat, **(section.get("protocol") or {})}}
    for key, raw in section.items():
        if key in PROTOCOL_KEYS:
            continue
        if key not in _PARSERS:
            continue  # another feature's (e.g. ``explorer``): read from ``extra``
        name, parser = _PARSERS[key]
        try:
            values[name] = parser(raw)
        except ValueError as err:
            if key in TARGET_SETTINGS:
                rejected.append(f"{SECTION}.{key}: {err}")
                warnings.append(
                    f"Trainium Lens: invalid setting {SECTION}.{key}: {err}; profiling is off until "
                    f"it is fixed (it says where code runs: no fallback)"
                )
                continue
            default = getattr(defaults, name)
            warnings.append(
                f"Trainium Lens: invalid setting {SECTION}.{key}: {err}; using the default ({_show(default)})"
            )
    if values.get("hosts") and values.get("slurm", Slurm()).login:  # one way across nodes
        del values["hosts"], values["slurm"]
        rejected.append(f"{SECTION}.hosts, {SECTION}.slurm.login: use one")
        warnings.append(
            f"Trainium Lens: invalid settings: both {SECTION}.hosts and {SECTION}.slurm.login are set; "
            "profiling is off until one is cleared (they say where code runs: no fallback)"
        )
    extra = {k: v for k, v in section.items() if k not in _PARSERS and k not in PROTOCOL_KEYS}
    return replace(defaults, extra=extra, rejected=tuple(rejected), **values), warnings


def _show(value: Any) -> str:
    if isinstance(value, Threshold):
        return "all lines" if not (value.share or value.us) else str(value)
    if value in (None, {}, ""):
        return "none"
    return str(value)


# -- the table's other sides: package.json and the client's payload -----------------
# ``_PARSERS`` is the one list of what the server reads. package.json's
# ``contributes.configuration`` declares the same settings for the editor, and the
# client (extension/src/settings.ts) sends them under the same keys; lsp/settings_schema.py
# derives both from the lines below and tests/unit/lsp/test_settings_schema.py fails
# when a setting is declared on one side only.

# Keys the server reads that are no editor setting: ``trusted`` (Workspace Trust, which
# the client adds), ``protocol`` (wait/warmup/active in one object, for other clients).
NOT_SETTINGS = ("trusted", "protocol")
# Settings only the client reads: declared in package.json, never sent.
CLIENT_ONLY = ("openResultsAfterRun",)
# Settings VS Code nests: ``trainiumLens.<key>.<sub>`` arrives as ``{<key>: {<sub>: ...}}``.
NESTED = {
    "warmWorker": ("idleSeconds",),
    "explorer": EXPLORER_KEYS,
    "script": ("args",),
    "slurm": ("login", "nodes", "partition"),
}


def payload_keys() -> list[str]:
    """The keys of the ``trainiumLens`` payload the client sends (its ``ServerSettings``)."""
    keys = [key for key in _PARSERS if key != "protocol"] + list(PROTOCOL_KEYS)
    return sorted(keys)


def names() -> list[str]:
    """Every editor setting (``trainiumLens.*`` in package.json), the client's own included."""
    out = [key for key in payload_keys() if key not in NOT_SETTINGS and key not in NESTED]
    out += [f"{key}.{sub}" for key, subs in NESTED.items() for sub in subs]
    return sorted(f"{SECTION}.{key}" for key in out + list(CLIENT_ONLY))


assert {f.name for f in fields(Settings)} - {"extra", "rejected"} == {name for name, _ in _PARSERS.values()}

"""``doctor``: can this target profile on Trainium, and if not, what to fix.

Each check is ``pass``, ``warn``, ``fail`` or ``skip`` with a detail and, when it
is not a pass, the fix. For an SSH host the connection checks (reachable, host
key, auth) come from one master connection attempt; everything else comes from
one probe (``hosttools/doctor/probe.py``, sent on stdin to the chosen Python: one round
trip). Locally the same probe runs in the local Python. The report is plain
data (``Report.to_dict``) so the editor can show it too.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from trainium_lens.errors import TargetError

if TYPE_CHECKING:
    from trainium_lens.targets.ssh import SshTarget
    from trainium_lens.targets.ssh_conn import SshFailure

PROBE = Path(__file__).with_name("probe.py")
PROBE_TIMEOUT_S = 120
MIN_FREE_BYTES = 5 * 1024**3  # a Neuron profile plus NEFF cache easily takes GBs
NOT_TRAINIUM = "not a Trainium host"

# In the order they are shown.
CHECKS = [
    ("ssh", "SSH reachable"),
    ("host_key", "host key"),
    ("auth", "authentication"),
    ("python", "Python"),
    ("torch", "torch"),
    ("torch_neuronx", "torch-neuronx flavour"),
    ("torch_xla", "torch-xla (Trn1 path)"),
    ("profiling_api", "Neuron profiling API"),
    ("neuron_devices", "Neuron devices"),
    ("neuron_explorer", "neuron-explorer"),
    ("profile_reader", "Neuron profile reader (here)"),
    ("disk", "free disk in work dir"),
    ("instance_type", "instance type"),
    ("warm_worker", "warm worker"),
]
TITLES = dict(CHECKS)


@dataclass
class Check:
    name: str
    title: str
    status: str  # "pass" | "warn" | "fail" | "skip"
    detail: str
    fix: str | None = None


@dataclass
class Report:
    host: str
    checks: list[Check] = field(default_factory=list)
    facts: dict = field(default_factory=dict)  # the probe's raw answer

    @property
    def ok(self) -> bool:
        return not any(c.status == "fail" for c in self.checks)

    def get(self, name: str) -> Check | None:
        return next((c for c in self.checks if c.name == name), None)

    def to_dict(self) -> dict:
        return {
            "host": self.host,
            "ok": self.ok,
            "checks": [asdict(c) for c in self.checks],
            "facts": self.facts,
        }


def _add(report: Report, name: str, status: str, detail: str, fix: str | None = None) -> None:
    report.checks.append(Check(name, TITLES[name], status, detail, fix))


def _skip_rest(report: Report, reason: str) -> None:
    done = {c.name for c in report.checks} | {"warm_worker"}  # run_doctor judges it, always
    for name, _title in CHECKS:
        if name not in done:
            _add(report, name, "skip", reason)


# -- gathering ---------------------------------------------------------------------
def run_doctor(
    host: str | None = None,
    *,
    ssh_config: str | None = None,
    remote_python: str | None = None,
    work_dir: str | None = None,
    python: str | None = None,
) -> Report:
    """Check ``host`` (None/"local": this machine, with ``python``)."""
    if not host or host == "local":
        report = _local(python or sys.executable, work_dir)
    else:
        report = _remote(host, ssh_config, remote_python, work_dir)
    _warm_worker_check(report, host or "local")
    return report


def _warm_worker_check(report: Report, host: str) -> None:
    """Whether a language server on this machine holds a warm worker for the host
    (targets/warm.py): it ends after its idle time or on the release command."""
    from trainium_lens.targets.warm import held_workers

    held = held_workers(host)
    if not held:  # after a failed step the rest is "skip", as everywhere in the report
        _add(report, "warm_worker", "skip" if not report.ok else "pass", "none held from this machine")
        return
    pids = ", ".join(f"pid {w['pid']} (up {w['age_s']:.0f} s)" for w in held)
    _add(
        report,
        "warm_worker",
        "warn",
        f"held by a language server: {pids}",
        "it ends by itself after trainiumLens.warmWorker.idleSeconds; run "
        "'Trainium Lens: Release Warm Worker' to end it now",
    )


def _local(python: str, work_dir: str | None) -> Report:
    from trainium_lens.targets.local import cache_root

    report = Report(host="local")
    for name in ("ssh", "host_key", "auth"):
        _add(report, name, "skip", "local target: no SSH")
    folder = Path(work_dir).expanduser() if work_dir else cache_root()
    folder.mkdir(parents=True, exist_ok=True)
    try:
        proc = subprocess.run(
            [python, "-", str(folder)], input=PROBE.read_bytes(), capture_output=True, timeout=PROBE_TIMEOUT_S
        )
    except FileNotFoundError:
        _add(report, "python", "fail", f"{python} does not exist", "pass --python PATH: a Python with torch")
        _skip_rest(report, "needs a Python")
        return report
    except subprocess.TimeoutExpired:
        _add(report, "python", "fail", f"the probe did not finish in {PROBE_TIMEOUT_S} s")
        _skip_rest(report, "needs the probe")
        return report
    _judge(report, _parse(proc), local=True)
    return report


def _remote(host: str, ssh_config: str | None, remote_python: str | None, work_dir: str | None) -> Report:
    from trainium_lens.targets.ssh import SshTarget

    report = Report(host=host)
    try:
        target = SshTarget(host, ssh_config=ssh_config, remote_python=remote_python, work_dir=work_dir)
    except TargetError as err:  # a bad host name or config path
        _add(report, "ssh", "fail", str(err), "check the host name and --ssh-config")
        _skip_rest(report, "needs an SSH connection")
        return report
    try:
        return _remote_checks(report, target, host)
    finally:
        target.close()  # our share of the master: stopped unless a run still uses it


def _remote_checks(report: Report, target: SshTarget, host: str) -> Report:
    from trainium_lens.targets.ssh import PREPARE_SCRIPT
    from trainium_lens.targets.ssh_conn import SshFailure

    try:
        target.conn.master()
    except SshFailure as err:
        _connection_failure(report, err)
        return report
    except TargetError as err:  # a bad host name or config path
        _add(report, "ssh", "fail", str(err), "check the host name and --ssh-config")
        _skip_rest(report, "needs an SSH connection")
        return report
    _add(report, "ssh", "pass", f"{host} answered")
    _add(report, "host_key", "pass", "matches known_hosts")
    _add(report, "auth", "pass", "key accepted (BatchMode)")
    try:
        proc = target.conn.run(
            PREPARE_SCRIPT,
            target.prepare_args("", "probe"),
            input=PROBE.read_bytes(),
            timeout=PROBE_TIMEOUT_S,
        )
    except TargetError as err:
        _add(report, "python", "fail", str(err))
        _skip_rest(report, "needs the probe")
        return report
    if proc.returncode == 71:  # the remote Python is missing or does not run
        from trainium_lens.targets.ssh import _remote_reason

        _add(
            report,
            "python",
            "fail",
            _remote_reason(proc.stderr.decode("utf-8", "replace"), 71),
            "pass --remote-python PATH (e.g. /opt/aws_neuronx_venv_pytorch_2_13/bin/python)",
        )
        _skip_rest(report, "needs a Python on the host")
        return report
    _judge(report, _parse(proc), local=False)
    return report


def _connection_failure(report: Report, err: SshFailure) -> None:
    kind = err.kind
    if kind in ("resolve", "refused", "timeout", "unreachable", "closed", "other"):
        _add(
            report,
            "ssh",
            "fail",
            str(err),
            "check the host name, port and network; `ssh HOST true` must work from this machine",
        )
        _skip_rest(report, "needs an SSH connection")
        return
    _add(report, "ssh", "pass", "the host answered")
    if kind in ("host_key_unknown", "host_key_changed"):
        _add(
            report,
            "host_key",
            "fail",
            str(err),
            "connect once with `ssh HOST`, check the fingerprint and accept it"
            if kind == "host_key_unknown"
            else "if the host was rebuilt: `ssh-keygen -R HOST`, then `ssh HOST` once to check",
        )
        _skip_rest(report, "needs a trusted host key")
        return
    _add(report, "host_key", "pass", "matches known_hosts")
    _add(
        report,
        "auth",
        "fail",
        str(err),
        "load your key into ssh-agent, or set User and IdentityFile for this host in your ssh config",
    )
    _skip_rest(report, "needs authentication")


def _parse(proc: subprocess.CompletedProcess) -> dict:
    for line in reversed(proc.stdout.decode("utf-8", "replace").splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                break
    err = proc.stderr.decode("utf-8", "replace").strip().splitlines()
    return {"probe_error": (err[-1] if err else f"exit {proc.returncode}")[:300]}


# -- judging -------------------------------------------------------------------------
# One named check per row of the report, in CHECKS order. Each reads the probe's
# facts and adds exactly one row; ``_Ctx`` holds what several of them share.
@dataclass
class _Ctx:
    facts: dict
    flag: str  # "--python" locally, "--remote-python" over SSH
    not_here: str  # ": not a Trainium host (...)" or ""
    flavour: str | None  # "native" | "xla" | None


def _judge(report: Report, facts: dict, local: bool) -> None:
    report.facts = facts
    flag = "--python" if local else "--remote-python"
    if "probe_error" in facts:
        _add(
            report,
            "python",
            "fail",
            f"the probe failed: {facts['probe_error']}",
            f"pass {flag} PATH: a working Python 3.10+",
        )
        _skip_rest(report, "needs the probe")
        return
    trainium = bool(facts.get("neuron_ls") or facts.get("dev_neuron"))
    ctx = _Ctx(
        facts,
        flag,
        "" if trainium else f": {NOT_TRAINIUM} (no neuron-ls, no /dev/neuron*)",
        facts.get("neuron_flavour"),
    )
    for check in (
        _check_python,
        _check_torch,
        _check_torch_neuronx,
        _check_torch_xla,
        _check_profiling_api,
        _check_neuron_devices,
        _check_neuron_explorer,
        _check_disk,
        _check_instance_type,
    ):
        check(report, ctx)


def _check_python(report: Report, ctx: _Ctx) -> None:
    facts = ctx.facts
    version = ".".join(str(v) for v in facts.get("python_version", []))
    if tuple(facts.get("python_version", [0])) < (3, 10):
        _add(
            report,
            "python",
            "fail",
            f"Python {version} at {facts['python']}: the harness needs 3.10+",
            f"pass {ctx.flag} PATH: a Python 3.10+ with torch",
        )
    else:
        _add(report, "python", "pass", f"Python {version} at {facts['python']}")


def _check_torch(report: Report, ctx: _Ctx) -> None:
    facts = ctx.facts
    if facts.get("torch"):
        _add(report, "torch", "pass", f"torch {facts['torch']}")
    else:
        _add(
            report,
            "torch",
            "fail",
            f"torch does not import in {facts['python']} ({facts.get('torch_error', 'not installed')})",
            f"pass {ctx.flag} PATH: the Neuron DLAMI venv (/opt/aws_neuronx_venv_pytorch_*) "
            f"or a Python with torch",
        )


def _check_torch_neuronx(report: Report, ctx: _Ctx) -> None:
    facts = ctx.facts
    if not facts.get("torch"):
        _add(report, "torch_neuronx", "skip", "needs torch")
    elif not facts.get("torch_neuronx"):
        _add(
            report,
            "torch_neuronx",
            "fail",
            "torch-neuronx is not installed" + ctx.not_here,
            "use a Trn2/Trn3 host with the Neuron DLAMI (its PyTorch venv has torch-neuronx); "
            "CPU/CUDA profiling works without it",
        )
    elif facts.get("torch_neuronx_error"):
        _add(
            report,
            "torch_neuronx",
            "fail",
            f"torch-neuronx {facts['torch_neuronx']} does not import: {facts['torch_neuronx_error']}",
            "repair the venv (or pick another)",
        )
    elif ctx.flavour == "native":
        _add(
            report,
            "torch_neuronx",
            "pass",
            f"torch-neuronx {facts['torch_neuronx']}: native TorchNeuron (device 'neuron')",
        )
    elif ctx.flavour == "xla":
        _add(
            report,
            "torch_neuronx",
            "pass",
            f"torch-neuronx {facts['torch_neuronx']}: the XLA flavour (Trn1): profiled with "
            f"backend xla (time per HLO instruction, mapped to lines by HLO metadata)",
        )
    else:
        _add(
            report,
            "torch_neuronx",
            "fail",
            f"torch-neuronx {facts['torch_neuronx']} registered no 'neuron' device",
            "check the Neuron install (neuron-ls)",
        )


def _check_profiling_api(report: Report, ctx: _Ctx) -> None:
    facts = ctx.facts
    names = facts.get("profiling_names") or {}
    params = facts.get("neuron_config_params") or []
    if ctx.flavour == "xla":
        _add(
            report,
            "profiling_api",
            "skip",
            "XLA flavour: torch.profiler's Neuron API is not "
            "used; backend xla reads the torch_xla profiler and neuron-explorer instead",
        )
    elif ctx.flavour != "native":
        _add(
            report,
            "profiling_api",
            "skip" if facts.get("torch_neuronx") else "fail",
            "needs native TorchNeuron" + ctx.not_here,
            None if facts.get("torch_neuronx") else "a Trn2/Trn3 host with TorchNeuron",
        )
    elif facts.get("profiling_error") or not all(names.values()):
        missing = [n for n, ok in names.items() if not ok]
        _add(
            report,
            "profiling_api",
            "fail",
            "torch_neuronx.profiling: " + (facts.get("profiling_error") or f"missing {', '.join(missing)}"),
            "upgrade torch-neuronx to a release with NeuronConfig/NeuronProfiler",
        )
    else:
        correlate = "correlate_device_time" in params
        _add(
            report,
            "profiling_api",
            "pass",
            f"NeuronConfig({', '.join(params[:6])}{', ...' if len(params) > 6 else ''}); "
            f"correlate_device_time {'accepted' if correlate else 'not in the signature'}; "
            f"modes {', '.join(facts.get('profile_modes') or [])}",
        )


def _check_neuron_devices(report: Report, ctx: _Ctx) -> None:
    facts = ctx.facts
    if facts.get("neuron_devices"):
        cores = facts.get("neuron_cores")
        _add(
            report,
            "neuron_devices",
            "pass",
            f"{facts['neuron_devices']} devices, "
            + (f"{cores} NeuronCores" if cores else "core count not reported")
            + " (neuron-ls)",
        )
    elif facts.get("neuron_ls_error"):
        _add(
            report,
            "neuron_devices",
            "fail",
            f"neuron-ls failed: {facts['neuron_ls_error']}",
            "check the Neuron driver (aws-neuronx-dkms) and runtime",
        )
    else:
        _add(
            report,
            "neuron_devices",
            "fail",
            "no Neuron devices" + (ctx.not_here or " (neuron-ls lists none)"),
            "run on a trn1/trn2/trn3 instance with the Neuron driver",
        )


def _check_neuron_explorer(report: Report, ctx: _Ctx) -> None:
    from trainium_lens.hosttools.doctor.neuron import judge_neuron_explorer, judge_profile_reader

    _add(report, "neuron_explorer", *judge_neuron_explorer(ctx.facts, ctx.flavour, ctx.not_here))
    _add(report, "profile_reader", *judge_profile_reader(not ctx.not_here))


def _check_disk(report: Report, ctx: _Ctx) -> None:
    facts = ctx.facts
    free = facts.get("disk_free")
    if free is None:
        _add(
            report,
            "disk",
            "fail",
            f"cannot read free space of {facts.get('work_dir')}: {facts.get('disk_error')}",
            "pick a writable work dir (--work-dir)",
        )
    else:
        text = f"{free / 1024**3:.1f} GiB free in {facts.get('work_dir')}"
        if free < MIN_FREE_BYTES:
            _add(report, "disk", "warn", text, "free space: Neuron profiles and NEFFs need GBs")
        else:
            _add(report, "disk", "pass", text)


def _check_instance_type(report: Report, ctx: _Ctx) -> None:
    facts = ctx.facts
    product = facts.get("neuron_ls_instance_type") or facts.get("product_name")
    if not product:
        _add(report, "instance_type", "skip", "not readable here (no DMI product name)")
    elif product.startswith(("trn", "inf")):
        _add(report, "instance_type", "pass", product)
    else:
        _add(
            report,
            "instance_type",
            "warn",
            f"{product}: {NOT_TRAINIUM}",
            "Neuron profiling needs a trn1/trn2/trn3 instance",
        )


def _check_torch_xla(report: Report, ctx: _Ctx) -> None:
    from trainium_lens.hosttools.doctor.xla import judge_torch_xla

    status, detail, fix = judge_torch_xla(ctx.facts, ctx.flavour)
    _add(report, "torch_xla", status, detail, fix)

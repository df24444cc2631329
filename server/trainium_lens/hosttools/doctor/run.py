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
from pathlib import Path
from typing import TYPE_CHECKING

from trainium_lens.errors import TargetError
from trainium_lens.hosttools.doctor.checks import judge
from trainium_lens.hosttools.doctor.report import Report, add, skip_rest

if TYPE_CHECKING:
    from trainium_lens.targets.ssh.conn import SshFailure
    from trainium_lens.targets.ssh.target import SshTarget
    from trainium_lens.targets.where import Where

PROBE = Path(__file__).with_name("probe.py")
PROBE_TIMEOUT_S = 120


# -- gathering ---------------------------------------------------------------------
def run_doctor(where: Where) -> Report:
    """Check the one host ``where`` names (``where.host`` None: this machine, with ``where.python``)."""
    if where.host is None:
        report = _local(where.python or sys.executable, where.work_dir)
    else:
        report = _remote(where)
    _warm_worker_check(report, where.host or "local")
    return report


def _warm_worker_check(report: Report, host: str) -> None:
    """Whether a language server on this machine holds a warm worker for the host
    (targets/warm/slot.py): it ends after its idle time or on the release command."""
    from trainium_lens.targets.warm.slot import held_workers

    held = held_workers(host)
    if not held:  # after a failed step the rest is "skip", as everywhere in the report
        add(report, "warm_worker", "skip" if not report.ok else "pass", "none held from this machine")
        return
    pids = ", ".join(f"pid {w['pid']} (up {w['age_s']:.0f} s)" for w in held)
    add(
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
        add(report, name, "skip", "local target: no SSH")
    folder = Path(work_dir).expanduser() if work_dir else cache_root()
    folder.mkdir(parents=True, exist_ok=True)
    try:
        proc = subprocess.run(
            [python, "-", str(folder)], input=PROBE.read_bytes(), capture_output=True, timeout=PROBE_TIMEOUT_S
        )
    except FileNotFoundError:
        add(report, "python", "fail", f"{python} does not exist", "pass --python PATH: a Python with torch")
        skip_rest(report, "needs a Python")
        return report
    except subprocess.TimeoutExpired:
        add(report, "python", "fail", f"the probe did not finish in {PROBE_TIMEOUT_S} s")
        skip_rest(report, "needs the probe")
        return report
    judge(report, _parse(proc), local=True)
    return report


def _remote(where: Where) -> Report:
    from trainium_lens.targets.make import make_target
    from trainium_lens.targets.ssh.target import SshTarget

    host = where.host or ""
    report = Report(host=host)
    try:
        target = make_target(where)
        assert isinstance(target, SshTarget)
    except TargetError as err:  # a bad host name or config path
        add(report, "ssh", "fail", str(err), "check the host name and --ssh-config")
        skip_rest(report, "needs an SSH connection")
        return report
    try:
        return _remote_checks(report, target, host)
    finally:
        target.close()  # our share of the master: stopped unless a run still uses it


def _remote_checks(report: Report, target: SshTarget, host: str) -> Report:
    from trainium_lens.targets.ssh.conn import SshFailure
    from trainium_lens.targets.ssh.scripts import PREPARE_SCRIPT

    try:
        target.conn.master()
    except SshFailure as err:
        _connection_failure(report, err)
        return report
    except TargetError as err:  # a bad host name or config path
        add(report, "ssh", "fail", str(err), "check the host name and --ssh-config")
        skip_rest(report, "needs an SSH connection")
        return report
    add(report, "ssh", "pass", f"{host} answered")
    add(report, "host_key", "pass", "matches known_hosts")
    add(report, "auth", "pass", "key accepted (BatchMode)")
    try:
        proc = target.conn.run(
            PREPARE_SCRIPT,
            target.prepare_args("", "probe"),
            input=PROBE.read_bytes(),
            timeout=PROBE_TIMEOUT_S,
        )
    except TargetError as err:
        add(report, "python", "fail", str(err))
        skip_rest(report, "needs the probe")
        return report
    if proc.returncode == 71:  # the remote Python is missing or does not run
        from trainium_lens.targets.ssh.target import remote_reason

        add(
            report,
            "python",
            "fail",
            remote_reason(proc.stderr.decode("utf-8", "replace"), 71),
            "pass --remote-python PATH (e.g. /opt/aws_neuronx_venv_pytorch_2_13/bin/python)",
        )
        skip_rest(report, "needs a Python on the host")
        return report
    judge(report, _parse(proc), local=False)
    return report


def _connection_failure(report: Report, err: SshFailure) -> None:
    kind = err.kind
    if kind in ("resolve", "refused", "timeout", "unreachable", "closed", "other"):
        add(
            report,
            "ssh",
            "fail",
            str(err),
            "check the host name, port and network; `ssh HOST true` must work from this machine",
        )
        skip_rest(report, "needs an SSH connection")
        return
    add(report, "ssh", "pass", "the host answered")
    if kind in ("host_key_unknown", "host_key_changed"):
        add(
            report,
            "host_key",
            "fail",
            str(err),
            "connect once with `ssh HOST`, check the fingerprint and accept it"
            if kind == "host_key_unknown"
            else "if the host was rebuilt: `ssh-keygen -R HOST`, then `ssh HOST` once to check",
        )
        skip_rest(report, "needs a trusted host key")
        return
    add(report, "host_key", "pass", "matches known_hosts")
    add(
        report,
        "auth",
        "fail",
        str(err),
        "load your key into ssh-agent, or set User and IdentityFile for this host in your ssh config",
    )
    skip_rest(report, "needs authentication")


def _parse(proc: subprocess.CompletedProcess) -> dict:
    for line in reversed(proc.stdout.decode("utf-8", "replace").splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                break
    err = proc.stderr.decode("utf-8", "replace").strip().splitlines()
    return {"probe_error": (err[-1] if err else f"exit {proc.returncode}")[:300]}

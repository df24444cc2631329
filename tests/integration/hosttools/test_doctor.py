"""``doctor`` against a real sshd on loopback and locally. This machine is not a
Trainium host: the Neuron checks must fail, each saying so, never pass by
accident; the connection checks must point at the step that failed."""

from __future__ import annotations

import json
import os
import sys

import pytest

from trainium_lens.cli import main
from trainium_lens.hosttools.doctor.report import CHECKS, NOT_TRAINIUM
from trainium_lens.hosttools.doctor.run import run_doctor
from trainium_lens.targets.where import Where

NAMES = [name for name, _title in CHECKS]


def must(report, name: str):
    """The report's row ``name`` (every check always reports a row)."""
    row = report.get(name)
    assert row is not None, name
    return row


NEURON = ("torch_neuronx", "profiling_api", "neuron_devices", "neuron_explorer")


@pytest.mark.ssh
def test_doctor_over_ssh_reports_every_check(sshd, ssh_control_dir, capsys, tmp_path):
    code = main(
        [
            "doctor",
            "--host",
            "lens-test",
            "--ssh-config",
            str(sshd.config),
            "--remote-python",
            sys.executable,
            "--work-dir",
            str(tmp_path / "wd"),
            "--json",
        ]
    )
    report = json.loads(capsys.readouterr().out)
    # off a Neuron host its checks are skipped with the reason: the host is fine for the rest
    assert code == 0 and report["ok"] is True
    status = {c["name"]: c["status"] for c in report["checks"]}
    assert list(status) == NAMES
    for name in ("ssh", "host_key", "auth", "python", "torch", "disk"):
        assert status[name] == "pass", report
    detail = {c["name"]: c["detail"] for c in report["checks"]}
    assert detail["python"].endswith(sys.executable)
    from importlib.metadata import version

    assert version("torch") in detail["torch"]
    for name in NEURON:
        assert status[name] == "skip" and NOT_TRAINIUM in detail[name], detail[name]
    assert str(tmp_path / "wd") in detail["disk"]
    assert status["instance_type"] in ("skip", "warn")


@pytest.mark.ssh
def test_doctor_over_ssh_text_output(sshd, ssh_control_dir, capsys):
    # python3 on the host has no torch: a failed torch check with the fix
    code = main(
        [
            "doctor",
            "--host",
            "lens-test",
            "--ssh-config",
            str(sshd.config),
            "--remote-python",
            "/usr/bin/python3",
        ]
    )
    out = capsys.readouterr().out
    assert code == 4  # the host cannot run it (the exit-code contract)
    assert "PASS  SSH reachable" in out
    assert "FAIL  torch " in out and "fix: pass --remote-python PATH" in out


@pytest.mark.ssh
@pytest.mark.parametrize(
    "alias, failed",
    [
        ("lens-refused", "ssh"),
        ("lens-changed", "host_key"),
        ("lens-unknown", "host_key"),
        ("lens-badauth", "auth"),
    ],
)
def test_doctor_points_at_the_connection_step_that_failed(sshd, ssh_control_dir, alias, failed):
    report = run_doctor(Where(host=alias, ssh_config=str(sshd.config)))
    status = {c.name: c.status for c in report.checks}
    assert list(status) == NAMES
    before = NAMES[: NAMES.index(failed)]
    assert all(status[n] == "pass" for n in before)
    assert status[failed] == "fail" and report.get(failed).fix
    assert all(status[n] == "skip" for n in NAMES[NAMES.index(failed) + 1 :])


@pytest.mark.ssh
def test_doctor_remote_python_missing(sshd, ssh_control_dir):
    report = run_doctor(Where(host="lens-test", ssh_config=str(sshd.config), remote_python="/no/such/python"))
    assert must(report, "python").status == "fail"
    assert "does not exist" in must(report, "python").detail
    assert must(report, "torch").status == "skip"


def test_doctor_local(tmp_path):
    report = run_doctor(Where(work_dir=str(tmp_path)))
    status = {c.name: c.status for c in report.checks}
    assert [status[n] for n in ("ssh", "host_key", "auth")] == ["skip"] * 3
    assert status["python"] == status["torch"] == "pass"
    # off a Neuron host its checks are skipped with the reason, and the report is ok
    assert all(status[n] == "skip" for n in NEURON)
    assert all("not a Trainium host" in report.get(n).detail for n in NEURON) and report.ok
    missing = run_doctor(Where(python=str(tmp_path / "nopython")))
    assert missing.get("python").status == "fail"
    # after a failed step the warm worker row is still judged, once (not "needs a Python")
    warm = [c for c in missing.checks if c.name == "warm_worker"]
    assert len(warm) == 1 and warm[0].status in ("skip", "warn") and "needs" not in warm[0].detail


STAND_IN_NEURON_LS = """#!/bin/sh
# Stand-in for aws-neuronx-tools' neuron-ls (no Trainium device here): the
# pre-2.34 JSON shape, and no --output-format (as before 2.34).
[ "$1" = "--json-output" ] || { echo "unknown option $1" >&2; exit 2; }
cat <<'JSON'
[{"neuron_device": 0, "bdf": "cc:00.0", "connected_to": [1], "nc_count": 8,
  "memory_size": 103079215104, "neuron_processes": []},
 {"neuron_device": 1, "bdf": "b5:00.0", "connected_to": [0], "nc_count": 8,
  "memory_size": 103079215104, "neuron_processes": []}]
JSON
"""
# Stand-in for neuron-explorer (aws-neuronx-tools): only the 2.33 form of the schema
# dump (`view --show-profile-schema`, OpenAPI YAML whose info.version is the profile
# schema, docs/neuron.md); anything else exits 2 as an unknown command would.
STAND_IN_NEURON_EXPLORER = """#!/bin/sh
[ "$1 $2" = "view --show-profile-schema" ] || exit 2
cat <<'YAML'
openapi: 3.0.3
info:
  title: Neuron Explorer profile schema
  version: 12.0.1
components:
  schemas:
    Instruction:
      type: object
YAML
"""
# Stand-in for TorchNeuron: registers the "neuron" PrivateUse1 backend (real
# torch API) and a profiling module with the documented names.
STAND_IN_TORCH_NEURONX = """
import torch
torch.utils.rename_privateuse1_backend("neuron")
"""
STAND_IN_PROFILING = """
import enum
class ProfileMode(enum.Enum):
    DEVICE = 1
    RUNTIME = 2
class NeuronConfig:
    def __init__(self, modes=None, profile_output_dir=None, capture_enabled_for_nc="0",
                 max_events_per_nc=None, correlate_device_time=False):
        pass
class NeuronProfiler:
    def __init__(self, config):
        self.config = config
"""


def test_doctor_passes_on_a_stand_in_trainium_host(tmp_path, monkeypatch):
    """The pass path of the Neuron checks, through the real probe in a real
    Python, with stand-ins for what cannot exist here (neuron-ls, neuron-explorer,
    torch-neuronx)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "neuron-ls").write_text(STAND_IN_NEURON_LS)
    (bin_dir / "neuron-explorer").write_text(STAND_IN_NEURON_EXPLORER)
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    pkg = tmp_path / "site" / "torch_neuronx"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(STAND_IN_TORCH_NEURONX)
    (pkg / "profiling.py").write_text(STAND_IN_PROFILING)
    # the package's metadata as pip leaves it: torch-neuronx of Neuron SDK 2.34
    dist = tmp_path / "site" / "torch_neuronx-2.14.3.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: torch-neuronx\nVersion: 2.14.3.1\n")
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "site"))
    report = run_doctor(Where(work_dir=str(tmp_path)))
    status = {c.name: c.status for c in report.checks}
    for name in ("python", "torch", "torch_neuronx", "profiling_api", "neuron_devices", "neuron_explorer"):
        assert status[name] == "pass", (name, report.get(name))
    assert "native TorchNeuron" in must(report, "torch_neuronx").detail
    assert "correlate_device_time accepted" in must(report, "profiling_api").detail
    assert must(report, "neuron_devices").detail.startswith("2 devices, 16 NeuronCores")
    explorer = must(report, "neuron_explorer").detail
    assert explorer.startswith(f"{bin_dir / 'neuron-explorer'}; writes profile schema 12.0.1")
    assert "TorchNeuron" in explorer
    assert status["profile_reader"] == "pass" and "pyarrow" in must(report, "profile_reader").detail
    sdk = must(report, "neuron_sdk")
    assert sdk.status == "pass" and sdk.detail.startswith("Neuron SDK 2.34 (torch-neuronx 2.14.3.1)")
    assert "Parquet" in sdk.detail and "no longer maintained from 2.34" in sdk.detail


def test_judging_the_older_xla_flavour_and_an_old_python():
    """The judge alone, on the facts a Trn1 host with the XLA torch-neuronx
    reports (stand-in facts: no such host here)."""
    from trainium_lens.hosttools.doctor.checks import judge as _judge
    from trainium_lens.hosttools.doctor.report import Report

    report = Report(host="trn1")
    _judge(
        report,
        {
            "python": "/opt/venv/bin/python",
            "python_version": [3, 9, 18],
            "torch": "2.9.0",
            "torch_neuronx": "2.9.0.2.15",
            "neuron_flavour": "xla",
            "neuron_ls": "/opt/aws/neuron/bin/neuron-ls",
            "neuron_devices": 1,
            "neuron_cores": 2,
            "disk_free": 1024**3,
            "work_dir": "/w",
            "product_name": "trn1.2xlarge",
        },
        local=False,
    )
    status = {c.name: c.status for c in report.checks}
    assert status["python"] == "fail" and "3.10" in must(report, "python").detail
    assert status["torch_neuronx"] == "pass" and "XLA flavour" in must(report, "torch_neuronx").detail
    assert "backend xla" in must(report, "torch_neuronx").detail
    assert status["profiling_api"] == "skip"
    # torch-neuronx's XLA flavour without torch-xla is broken; with it, the row says
    # the version and whether source lines will be in the HLO
    assert status["torch_xla"] == "fail"
    report = Report(host="trn1")
    _judge(
        report,
        {
            "python": "/opt/venv/bin/python",
            "python_version": [3, 10, 12],
            "torch": "2.9.0",
            "torch_neuronx": "2.9.0.2.15",
            "neuron_flavour": "xla",
            "torch_xla": "2.9.0",
            "xla_ir_debug_api": True,
            "xla_debug_env": {"XLA_IR_DEBUG": None, "XLA_HLO_DEBUG": None},
            "neuron_explorer": "/opt/aws/neuron/bin/neuron-explorer",
        },
        local=False,
    )
    row = must(report, "torch_xla")
    assert row.status == "pass" and "torch-xla 2.9.0" in row.detail and "XLA_HLO_DEBUG" in row.detail
    assert "fresh cache" in row.detail
    assert "Parquet" in must(report, "neuron_explorer").detail
    assert status["neuron_devices"] == "pass" and status["instance_type"] == "pass"
    assert status["disk"] == "warn"


def test_the_neuron_explorer_row_names_the_profile_schema_it_writes():
    """Judged alone on stand-in facts: a documented version, a newer one (read through
    its SchemaFields, not refused), none reported; pyarrow missing on this machine."""
    from trainium_lens.hosttools.doctor import neuron as doctor_neuron

    path = "/opt/aws/neuron/bin/neuron-explorer"
    facts = {"neuron_explorer": path, "neuron_explorer_schema": "7.4.0"}
    assert doctor_neuron.judge_neuron_explorer(facts, "xla", "")[1].startswith(
        f"{path}; writes profile schema 7.4.0"
    )
    status, detail, _fix = doctor_neuron.judge_neuron_explorer(
        {**facts, "neuron_explorer_schema": "13.0.0"}, None, ""
    )
    assert status == "pass" and "13.0.0, read through its SchemaFields" in detail
    assert "not reported" in doctor_neuron.judge_neuron_explorer({"neuron_explorer": path}, None, "")[1]
    assert doctor_neuron.judge_neuron_explorer({}, None, ": not here")[0] == "fail"


def test_the_profile_reader_row_without_pyarrow(monkeypatch):
    from trainium_lens.hosttools.doctor import neuron as doctor_neuron

    monkeypatch.setattr(doctor_neuron.importlib.util, "find_spec", lambda name: None)
    status, detail, fix = doctor_neuron.judge_profile_reader(trainium=True)
    assert status == "warn" and "keep their host figures" in detail and "pip install pyarrow" in (fix or "")
    assert doctor_neuron.judge_profile_reader(trainium=False)[0] == "skip"


@pytest.mark.parametrize(
    "version, flavour, status, says",
    [
        ("2.13.3", "native", "pass", "Neuron SDK 2.33 (torch-neuronx 2.13.3)"),
        ("2.14.3.0", "native", "pass", "Neuron SDK 2.33"),
        ("2.13.3.1", "native", "pass", "Neuron SDK 2.34"),
        ("2.14.3.1+ab12cd", "native", "pass", "Neuron SDK 2.34"),
        ("2.15.0", "native", "warn", "not a release of a Neuron SDK this tool knows (2.33, 2.34)"),
        ("installed", "native", "warn", "torch-neuronx installed is not a release"),
        ("2.9.0.2.11", "xla", "pass", "XLA flavour (Trn1"),
        (None, None, "skip", "no Neuron SDK found"),
    ],
)
def test_the_neuron_sdk_row_names_the_release_and_its_reader(version, flavour, status, says):
    """Judged alone on stand-in facts (the probe reads torch-neuronx's package metadata)."""
    from trainium_lens.hosttools.doctor import neuron as doctor_neuron

    got = doctor_neuron.judge_neuron_sdk({"torch_neuronx": version}, flavour)
    assert got[0] == status and says in got[1], got
    assert (got[2] is not None) == (status == "warn")

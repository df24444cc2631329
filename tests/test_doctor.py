"""``doctor`` against a real sshd on loopback and locally. This machine is not a
Trainium host: the Neuron checks must fail, each saying so, never pass by
accident; the connection checks must point at the step that failed."""

from __future__ import annotations

import json
import sys

import pytest

from trainium_lens.cli import main
from trainium_lens.doctor import CHECKS, NOT_TRAINIUM, run_doctor

NAMES = [name for name, _title in CHECKS]
NEURON = ("torch_neuronx", "profiling_api", "neuron_devices", "neuron_explorer")


@pytest.mark.ssh
def test_doctor_over_ssh_reports_every_check(sshd, ssh_control_dir, capsys, tmp_path):
    code = main(["doctor", "--host", "lens-test", "--ssh-config", str(sshd.config),
                 "--remote-python", sys.executable, "--work-dir", str(tmp_path / "wd"),
                 "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 1 and report["ok"] is False  # the Neuron checks fail here
    status = {c["name"]: c["status"] for c in report["checks"]}
    assert list(status) == NAMES
    for name in ("ssh", "host_key", "auth", "python", "torch", "disk"):
        assert status[name] == "pass", report
    detail = {c["name"]: c["detail"] for c in report["checks"]}
    assert detail["python"].endswith(sys.executable)
    from importlib.metadata import version

    assert version("torch") in detail["torch"]
    for name in NEURON:
        assert status[name] == "fail" and NOT_TRAINIUM in detail[name], detail[name]
        assert next(c["fix"] for c in report["checks"] if c["name"] == name)
    assert str(tmp_path / "wd") in detail["disk"]
    assert status["instance_type"] in ("skip", "warn")


@pytest.mark.ssh
def test_doctor_over_ssh_text_output(sshd, ssh_control_dir, capsys):
    # python3 on the host has no torch: a failed torch check with the fix
    code = main(["doctor", "--host", "lens-test", "--ssh-config", str(sshd.config),
                 "--remote-python", "/usr/bin/python3"])
    out = capsys.readouterr().out
    assert code == 1
    assert "PASS  SSH reachable" in out
    assert "FAIL  torch " in out and "fix: pass --remote-python PATH" in out


@pytest.mark.ssh
@pytest.mark.parametrize("alias, failed", [
    ("lens-refused", "ssh"), ("lens-changed", "host_key"), ("lens-unknown", "host_key"),
    ("lens-badauth", "auth"),
])
def test_doctor_points_at_the_connection_step_that_failed(sshd, ssh_control_dir, alias,
                                                          failed):
    report = run_doctor(alias, ssh_config=str(sshd.config))
    status = {c.name: c.status for c in report.checks}
    assert list(status) == NAMES
    before = NAMES[:NAMES.index(failed)]
    assert all(status[n] == "pass" for n in before)
    assert status[failed] == "fail" and report.get(failed).fix
    assert all(status[n] == "skip" for n in NAMES[NAMES.index(failed) + 1:])


@pytest.mark.ssh
def test_doctor_remote_python_missing(sshd, ssh_control_dir):
    report = run_doctor("lens-test", ssh_config=str(sshd.config),
                        remote_python="/no/such/python")
    assert report.get("python").status == "fail"
    assert "does not exist" in report.get("python").detail
    assert report.get("torch").status == "skip"


def test_doctor_local(tmp_path):
    report = run_doctor(None, work_dir=str(tmp_path))
    status = {c.name: c.status for c in report.checks}
    assert [status[n] for n in ("ssh", "host_key", "auth")] == ["skip"] * 3
    assert status["python"] == status["torch"] == "pass"
    assert all(status[n] == "fail" for n in NEURON)
    missing = run_doctor(None, python=str(tmp_path / "nopython"))
    assert missing.get("python").status == "fail"

"""TorchNeuron (Trn2/Trn3) device time from the device profile when ``key_averages()``
carries none: NeuronConfig's session folder → ``neuron-explorer view --session-dir``
on the host (harness/eager/neuron.py, neuron_view.py) → the same reader and stack
frames as Trn1 (engine/device_profile.py) → the result and the CLI.

STAND-INS (no Trainium, no TorchNeuron, no neuron-explorer can exist here):
* TorchNeuron: an empty ``torch_neuronx`` package and a sitecustomize that lets the
  real ``NeuronBackend`` run on the CPU (CPU activity only, so the profiler reports
  no device time, as one public TorchNeuron build did) and writes, where NeuronConfig
  would, the session folder the docs show (``<instance>_pid_<pid>/<timestamp>/``:
  ``neff_<hash>_vnc_0.neff`` files and ``profile_nc_0_session_0.ntff``), the NTFF
  holding JSON for the stand-in explorer;
* ``neuron-explorer``: tests/support/neuron_explorer.py.
Everything else is real: torch.profiler on real code, the harness, the runner, the CLI.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from tests.conftest import DATA
from tests.support.harness import HarnessStandIn
from tests.support.neuron_explorer import install_standin
from trainium_lens.engine.runner import profile
from trainium_lens.harness.eager import neuron
from trainium_lens.model.job import Job

LIB = "/opt/venv/lib/python3.12/site-packages/torch/nn/modules/linear.py"
DATA_FILE = DATA / "xla_lines.py"
STEPS = 5  # the default protocol's active steps


def data_lines() -> dict[str, int]:
    text = DATA_FILE.read_text().splitlines()
    tags = {"helper": "HELPER-DOT", "call1": "CALL-1", "call2": "CALL-2", "add": "ADD"}
    return {k: next(i for i, s in enumerate(text, 1) if f"# {tag}" in s) for k, tag in tags.items()}


def session_spec(file: str, steps: int = STEPS, schema: str = "12.0.1") -> dict:
    """Each step runs three NEFFs: the helper's matmul (from CALL-1 and CALL-2), a relu
    on CALL-2, the add. Per step: helper 0-400 and 300-500 on pe (union 500 ns), relu
    500-540, add 540-600: 600 ns busy."""
    at = data_lines()
    frames = [
        [1, 125, 2],
        [2, at["helper"], 3],
        [2, at["call1"], 0],
        [2, at["helper"], 5],
        [2, at["call2"], 0],
        [2, at["add"], 0],
        [2, at["call2"], 0],
    ]
    instructions = []
    for k in range(steps):
        t = k * 10_000
        instructions += [
            [t, t + 400, "pe", "dot.1", [1], {"raw_flops": 2 * 64**3}],
            [t + 300, t + 500, "pe", "dot.2", [4], {"raw_flops": 2 * 64**3}],
            [t + 500, t + 540, "act", "maximum.3", [7], {}],
            [t + 540, t + 600, "dve", "add.4", [6], {"hbm_write_bytes": 16384}],
        ]
    step = ["neff_11_vnc_0.neff", "neff_11_vnc_0.neff", "neff_12_vnc_0.neff", "neff_13_vnc_0.neff"]
    return {
        "schema": schema,
        "files": [LIB, file],
        "frames": frames,
        "instructions": instructions,
        "executions": step * steps,
    }


def write_session(profile_dir: Path, spec: dict | None) -> Path:
    """What NeuronConfig(profile_output_dir=...) leaves, as the Neuron docs show it."""
    session = profile_dir / "i-0abc_pid_4242" / "20261130T101500"
    session.mkdir(parents=True, exist_ok=True)
    for h in (11, 12, 13):
        (session / f"neff_{h}_vnc_0.neff").write_bytes(b"stand-in NEFF")
    (session / "profile_nc_0_session_0.ntff").write_text("" if spec is None else json.dumps(spec))
    return session


def backend_for(tmp_path: Path) -> neuron.NeuronBackend:
    import torch

    backend = neuron.NeuronBackend(torch)
    backend.profile_dir = str(tmp_path / "b1-0.neuron")
    return backend


def test_the_session_folder_is_processed_whole_on_the_host(tmp_path, monkeypatch):
    log = install_standin(tmp_path, monkeypatch)
    backend = backend_for(tmp_path)
    session = write_session(Path(backend.profile_dir or ""), session_spec(str(DATA_FILE)))
    views = backend.device_views(str(tmp_path), "b1-0", STEPS)["neuron_views"]
    assert [(v["mode"], v["steps"], v["error"]) for v in views] == [("session", STEPS, None)]
    [call] = [json.loads(x) for x in log.read_text().splitlines()]
    assert call == ["view", "--session-dir", backend.profile_dir, "--output-file", views[0]["parquet"]]
    assert sorted(p.name for p in Path(views[0]["parquet"]).glob("Instruction*")) == [
        "Instruction_0.parquet",
        "Instruction_1.parquet",
    ]
    # an empty NTFF (docs: no execution captured) and no NTFF at all: one line each
    (session / "profile_nc_0_session_0.ntff").write_text("")
    [empty] = backend.device_views(str(tmp_path), "b1-1", STEPS)["neuron_views"]
    assert empty["parquet"] is None and "empty: no execution was captured" in empty["error"]
    (session / "profile_nc_0_session_0.ntff").unlink()
    [none] = backend.device_views(str(tmp_path), "b1-2", STEPS)["neuron_views"]
    assert "wrote no device trace (NTFF)" in none["error"]


def neuron_result(src: Path, run_dir: Path, views: list[dict]) -> dict:
    """What the eager harness writes for backend neuron when key_averages() had no
    device time: CPU figures on clock cpu, ATen ops per line, and the views."""
    at = data_lines()
    line = {"file": "tests/data/xla_lines.py", "calls": 1.0}
    ops = [{"name": "aten::mm", "calls": 1.0, "self_time_us": 9.0, "self_cpu_us": 9.0, "direct_calls": 1.0}]
    return {
        "schema_version": 3,
        "run_id": "b1-0",
        "batch_id": "b1",
        "created_at": "2026-11-30T10:15:00+00:00",
        "backend": "neuron",
        "clock": "cpu",
        "host": "local",
        "function": {"file": "tests/data/xla_lines.py", "name": "two_calls", "line": at["call1"] - 1},
        "totals": {"self_time_us": 40.0, "self_cpu_us": 40.0, "wall_us_median": 90.0, "steps": STEPS},
        "lines": [
            {**line, "line": at["helper"], "self_time_us": 18.0, "total_time_us": 18.0, "self_cpu_us": 18.0},
            {
                **line,
                "line": at["call1"],
                "self_time_us": 0.0,
                "total_time_us": 9.0,
                "self_cpu_us": 0.0,
                "backward_self_time_us": 5.0,
            },
            {
                **line,
                "line": at["add"],
                "self_time_us": 4.0,
                "total_time_us": 4.0,
                "self_cpu_us": 4.0,
                "ops": ops,
            },
        ],
        "artifacts": {
            "location": "local",
            "run_dir": str(run_dir),
            "source_root": str(src),
            "neuron_profile_dir": str(run_dir / "b1-0.neuron"),
            "neuron_views": views,
        },
        "signals": {"device_time_reported": False},
    }


def test_a_neuron_result_without_device_time_reads_its_session_profile(tmp_path, monkeypatch):
    install_standin(tmp_path, monkeypatch)
    src, run_dir = DATA_FILE.parents[2], tmp_path / "run"
    backend = backend_for(run_dir)
    write_session(Path(backend.profile_dir or ""), session_spec(str(DATA_FILE)))
    views = backend.device_views(str(run_dir), "b1-0", STEPS)["neuron_views"]
    [result] = profile(
        Job(src, "tests/data/xla_lines.py"), HarnessStandIn([neuron_result(src, run_dir, views)], fetch=False)
    )
    at = data_lines()
    got = {s.line: s for s in result.lines}
    assert result.clock == "neuron" and result.signals.device_time_reported
    # per step: the five steps' union divided by five
    assert got[at["helper"]].self_time_us == pytest.approx(0.5)
    assert got[at["call2"]].total_time_us == pytest.approx(0.24)
    assert got[at["add"]].self_time_us == pytest.approx(0.06)
    assert result.totals.self_time_us == pytest.approx(0.6) and result.unattributed_us == 0.0
    assert result.totals.forward_time_us + result.totals.backward_time_us == pytest.approx(0.6)
    # the host's CPU figures stay beside, never shown as device time
    assert got[at["helper"]].self_cpu_us == 18.0
    add = got[at["add"]]
    assert [(o.name, o.calls, o.self_time_us, o.self_cpu_us) for o in add.ops] == [
        ("aten::mm", 1.0, 0.0, 9.0)
    ]
    assert [i.name for i in add.instructions] == ["add.4"]
    assert got[at["call1"]].backward_self_time_us == 0.0  # a CPU figure: no split in the profile
    note = next(w for w in result.signals.warnings if "TorchNeuron session profile" in w)
    assert f"divided by {STEPS}" in note and "confirmed: its 20 NEFF executions repeat 5 times" in note
    assert not [f for f in result.findings if f.kind == "no_device_time"]


def test_neffs_without_stack_frames_leave_the_time_unattributed_and_say_why(tmp_path, monkeypatch):
    install_standin(tmp_path, monkeypatch)
    src, run_dir = DATA_FILE.parents[2], tmp_path / "run"
    backend = backend_for(run_dir)
    spec = session_spec(str(DATA_FILE))
    for ins in spec["instructions"]:
        ins[4] = []
    write_session(Path(backend.profile_dir or ""), spec)
    views = backend.device_views(str(run_dir), "b1-0", STEPS)["neuron_views"]
    [result] = profile(
        Job(src, "tests/data/xla_lines.py"), HarnessStandIn([neuron_result(src, run_dir, views)], fetch=False)
    )
    assert result.clock == "neuron" and result.unattributed_us == pytest.approx(0.6)
    assert all(s.self_time_us == 0.0 for s in result.lines)
    assert any(
        "name no stack frames" in w and "NEURON_FRAMEWORK_DEBUG=1" in w for w in result.signals.warnings
    )


def test_a_session_that_is_not_the_profiled_steps_says_so(tmp_path, monkeypatch):
    install_standin(tmp_path, monkeypatch)
    src, run_dir = DATA_FILE.parents[2], tmp_path / "run"
    backend = backend_for(run_dir)
    write_session(Path(backend.profile_dir or ""), session_spec(str(DATA_FILE), steps=STEPS + 1))
    views = backend.device_views(str(run_dir), "b1-0", STEPS)["neuron_views"]
    [result] = profile(
        Job(src, "tests/data/xla_lines.py"), HarnessStandIn([neuron_result(src, run_dir, views)], fetch=False)
    )
    assert result.clock == "neuron"
    note = next(w for w in result.signals.warnings if "TorchNeuron session profile" in w)
    assert "NOT confirmed" in note and "do not form 5 equal steps" in note


def test_a_session_profile_that_cannot_be_read_keeps_the_cpu_figures(tmp_path, monkeypatch):
    install_standin(tmp_path, monkeypatch)
    src, run_dir = DATA_FILE.parents[2], tmp_path / "run"
    backend = backend_for(run_dir)
    spec = {**session_spec(str(DATA_FILE)), "drop": ["StackFrame.file_location_id"]}
    write_session(Path(backend.profile_dir or ""), spec)
    views = backend.device_views(str(run_dir), "b1-0", STEPS)["neuron_views"]
    [result] = profile(
        Job(src, "tests/data/xla_lines.py"), HarnessStandIn([neuron_result(src, run_dir, views)], fetch=False)
    )
    assert (
        result.clock == "cpu"
        and result.line("tests/data/xla_lines.py", data_lines()["add"]).self_time_us == 4.0
    )
    assert "no column StackFrame.file_location_id" in (result.signals.neuron_profile_error or "")
    kinds = {f.kind: f for f in result.findings}
    assert "no_device_time" in kinds and "neuron_no_device_profile" in kinds
    assert "StackFrame.file_location_id" in kinds["neuron_no_device_profile"].message


# STAND-IN TorchNeuron for the harness process (see the module docstring)
SITECUSTOMIZE = """\
import json, os
SPEC = json.loads({spec!r})
from trainium_lens.harness.eager import neuron
neuron.unavailable_reason = lambda torch: None  # "a neuron device is present"
B = neuron.NeuronBackend
B.device = "cpu"
B.activities = lambda self: [self.torch.profiler.ProfilerActivity.CPU]  # no device time
B.sync = lambda self: None
def profiler_kwargs(self, run_dir, run_id):
    if os.environ.get("NEURON_FRAMEWORK_DEBUG") != "1":  # docs: no stack info in the NEFFs then
        for ins in SPEC["instructions"]:
            ins[4] = []
    self.profile_dir = os.path.join(run_dir, run_id + ".neuron")
    session = os.path.join(self.profile_dir, "i-0abc_pid_4242", "20261130T101500")
    os.makedirs(session, exist_ok=True)
    for h in (11, 12, 13):
        with open(os.path.join(session, "neff_%d_vnc_0.neff" % h), "wb") as fh:
            fh.write(b"stand-in NEFF")
    with open(os.path.join(session, "profile_nc_0_session_0.ntff"), "w") as fh:
        json.dump(SPEC, fh)
    return {{}}
B.profiler_kwargs = profiler_kwargs
"""


def test_a_torchneuron_run_end_to_end_gets_device_time_per_line(tmp_path, monkeypatch, capsys):
    """The real eager harness on real code (the CPU plays the device), its profiler
    reporting no device time: the session profile gives the lines their device time."""
    from trainium_lens.cli import main

    install_standin(tmp_path, monkeypatch)
    site = tmp_path / "site"
    (site / "torch_neuronx").mkdir(parents=True)
    (site / "torch_neuronx" / "__init__.py").write_text('"""STAND-IN: only found, never used."""\n')
    spec = session_spec(str(DATA_FILE.resolve()))
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE.format(spec=json.dumps(spec)))
    monkeypatch.setenv("PYTHONPATH", f"{site}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    monkeypatch.setenv("TRAINIUM_LENS_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(DATA_FILE.parents[2])
    out = tmp_path / "r.json"
    argv = ["profile", "tests/data/xla_lines.py", "two_calls", "--backend", "neuron"]
    code = main([*argv, "--python", sys.executable, "--json", str(out), "--timing-calls", "2"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    data = json.loads(out.read_text())
    r = data[0] if isinstance(data, list) else data
    assert (r["backend"], r["clock"]) == ("neuron", "neuron") and r["signals"]["neuron_profile_error"] is None
    [view] = r["artifacts"]["neuron_views"]
    # the session holds every recorded step: the protocol's, and one more for each
    # step a busy host disturbed (harness/eager/steady.py measures it again)
    st = r["stability"]
    recorded = st["steps_measured"] * st["calls_per_step"]
    assert (view["mode"], view["steps"]) == ("session", recorded) and recorded >= STEPS and view["parquet"]
    # the stand-in's session holds STEPS steps' device time, spread over the recorded steps
    per = STEPS / recorded
    at = data_lines()
    got = {s["line"]: s for s in r["lines"] if s["file"] == "tests/data/xla_lines.py"}
    assert got[at["helper"]]["self_time_us"] == pytest.approx(0.5 * per)
    assert got[at["add"]]["self_time_us"] == pytest.approx(0.06 * per)
    assert got[at["add"]]["self_cpu_us"] > 0  # the real CPU figure kept beside it
    assert any(o["name"] == "aten::add" and o["calls"] >= 1 for o in got[at["add"]]["ops"])
    assert r["totals"]["self_time_us"] == pytest.approx(0.6 * per)
    assert "clock: Neuron device time" in printed
    # backend neuron: each op of the trace carries PyTorch's thread counter (the op map's key)
    ops = [
        e
        for e in json.loads(Path(r["artifacts"]["trace"]).read_text())["traceEvents"]
        if e.get("cat") == "cpu_op"
    ]
    tagged = [e for e in ops if "Source line" in e["args"]]
    assert tagged and all(isinstance(e["args"].get("Torch thread"), int) for e in tagged)
    assert any("wrote no framework_mapping" in w for w in r["signals"]["warnings"])

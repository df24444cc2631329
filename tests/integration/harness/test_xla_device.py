"""Trn1 device time for backend xla: capture files → ``neuron-explorer view`` on the
host (harness/xla/device.py) → Parquet → per-line device time in the result
(engine/device_profile.py, called by the runner) → the CLI.

STAND-INS (no Trainium device and no Neuron Explorer binary can exist here):
* the capture files: ``.neff``/``.ntff`` named as the runtime names them, the NTFF
  holding JSON that says which instructions the stand-in explorer should report;
* ``neuron-explorer``: a small script that implements ``view -n NEFF -s NTFF
  --output-file DIR`` (and ``view --session-dir``) by writing the Parquet tables of
  the documented schema (tests/support/neuron_fixtures.py, docs/neuron.md) from
  that JSON.
Everything else is real: the subprocesses, pyarrow, the runner, the store, the CLI
and, for a remote run, the SSH fetch against the loopback sshd.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import DATA, XLA_PY, needs_xla
from tests.support.harness import HarnessStandIn
from tests.support.neuron_explorer import install_standin
from trainium_lens.engine.runner import profile
from trainium_lens.harness.eager import neuron_view
from trainium_lens.harness.xla import device as xla_device
from trainium_lens.lsp.present.hover_hlo import hlo_section
from trainium_lens.model.job import Job
from trainium_lens.model.store import RunStore

LIB = "/opt/venv/lib/python3.10/site-packages/torch/nn/modules/linear.py"


def capture(inspect: Path, src: Path, schema: str = "7.4.0", **extra) -> tuple[Path, Path]:
    """Stand-in capture of one step: model.py line 10 calls a linear layer (library
    frame → user frame), line 11 a helper on line 30; the pe and act engines overlap."""
    inspect.mkdir(parents=True, exist_ok=True)
    neff, ntff = inspect / "neff_4242424.neff", inspect / "4242424_instid_0_vnc_0.ntff"
    neff.write_bytes(b"stand-in NEFF")
    ntff.write_text(
        json.dumps(
            {
                "schema": schema,
                "files": [LIB, str(src / "model.py")],
                "frames": [[1, 125, 2], [2, 10, 0], [2, 30, 4], [2, 11, 0]],
                "instructions": [
                    [0, 100, "pe", "dot.1", [1], {"raw_flops": 524288, "hbm_read_bytes": 4096}],
                    [50, 150, "act", "dot.1", [1], {"hbm_write_bytes": 2048}],
                    [150, 170, "act", "fusion.2", [3, 2], {"raw_flops": 64}],
                    [200, 230, "pool", "copy.3", [], {"hbm_read_bytes": 512}],
                ],
                **extra,
            }
        )
    )
    return neff, ntff


def host_result(src: Path, run_dir: Path, views: list[dict]) -> dict:
    """What the xla harness writes on Trn1 (host figures on its own clock) plus the views."""
    line = {"file": "model.py", "self_cpu_us": 7.0, "calls": 1.0}
    return {
        "schema_version": 1,
        "run_id": "b1-0",
        "batch_id": "b1",
        "created_at": "2026-11-30T04:00:00+00:00",
        "backend": "xla",
        "clock": "xla-neuron",
        "host": "local",
        "function": {"file": "model.py", "name": "step", "line": 9},
        "totals": {"self_time_us": 9.0, "self_cpu_us": 9.0, "wall_us_median": 30.0, "steps": 5},
        "lines": [
            {**line, "line": 10, "self_time_us": 7.0, "total_time_us": 7.0},
            {**line, "line": 12, "self_time_us": 2.0, "total_time_us": 2.0, "self_cpu_us": 2.0},
        ],
        "artifacts": {
            "location": "local",
            "run_dir": str(run_dir),
            "source_root": str(src),
            "neuron_profile_dir": str(run_dir / "neuron-inspect"),
            "neuron_views": views,
        },
        "signals": {"device_time_reported": True},
    }


def show(path: Path) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "trainium_lens", "show", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_harness_pairs_by_the_runtime_hash_and_runs_the_view_per_pair(tmp_path, monkeypatch):
    log = install_standin(tmp_path, monkeypatch)
    inspect, src = tmp_path / "run" / "neuron-inspect", tmp_path / "src"
    device = xla_device.DeviceCapture(str(inspect), None)
    device.mark()  # nothing yet: everything below belongs to this function
    neff, ntff = capture(inspect, src)
    (inspect / "4242424_instid_0_vnc_1.ntff").write_text("{}")  # another core: same step again
    (inspect / "77777_instid_0_vnc_0.ntff").write_text("{}")  # no NEFF for it
    views = device.process(str(tmp_path / "run" / "b1-0.neuron-view"))
    assert [(v["neff"], v["ntff"], v["error"] is None) for v in views] == [
        (str(neff), str(ntff), True),
        (None, str(inspect / "77777_instid_0_vnc_0.ntff"), False),
    ]
    assert "no NEFF pairs" in views[1]["error"]
    [call] = [json.loads(x) for x in log.read_text().splitlines()]
    assert call == ["view", "-n", str(neff), "-s", str(ntff), "--output-file", views[0]["parquet"]]
    assert (Path(views[0]["parquet"]) / "Instruction.parquet").exists()
    assert device.process(str(tmp_path / "again")) == []  # each NTFF once per process


def test_harness_view_failures_are_one_line_each(tmp_path, monkeypatch):
    inspect = tmp_path / "neuron-inspect"
    neff, ntff = capture(inspect, tmp_path / "src")
    pairs = xla_device.pair([str(neff)], [str(ntff)])
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(neuron_view, "DEFAULT_BINARY", str(tmp_path / "nope"))
    [missing] = neuron_view.view_pairs(pairs, str(tmp_path / "out"))
    assert missing["parquet"] is None and "install aws-neuronx-tools" in missing["error"]
    install_standin(tmp_path, monkeypatch)
    ntff.write_text(json.dumps({"fail": "NTFF is truncated"}))
    [failed] = neuron_view.view_pairs(pairs, str(tmp_path / "out"))
    assert failed["error"] == "neuron-explorer view failed (exit 1): ERROR: NTFF is truncated"


def test_device_time_per_line_reaches_the_result_and_the_cli(tmp_path, monkeypatch):
    install_standin(tmp_path, monkeypatch)
    src, run_dir = tmp_path / "src", tmp_path / "run"
    capture(run_dir / "neuron-inspect", src)
    device = xla_device.DeviceCapture(str(run_dir / "neuron-inspect"), None)
    views = device.process(str(run_dir / "b1-0.neuron-view"))
    store = RunStore(tmp_path / "ws")
    [result] = profile(
        Job(tmp_path, "model.py"), HarnessStandIn([host_result(src, run_dir, views)]), store=store
    )
    assert result.clock == "neuron" and result.signals.neuron_profile_error is None
    got = {s.line: s for s in result.lines}
    # line 10: dot.1 on pe [0,100] and act [50,150] → union 150 ns (not the 200 ns sum)
    assert got[10].self_time_us == pytest.approx(0.150)
    assert {e.engine: e.time_us for e in got[10].engines} == {"act": 0.100, "pe": 0.100}
    assert got[10].self_cpu_us == 7.0  # the host figure stays beside the device one
    # fusion.2: frames on line 30 (helper, called from 11) and 10 → tie: the first listed (30)
    assert got[30].self_time_us == pytest.approx(0.020) and got[11].total_time_us == pytest.approx(0.020)
    assert [(i.name, i.credited, i.line) for i in got[10].instructions] == [
        ("dot.1", True, 10),
        ("fusion.2", False, 30),
    ]
    assert got[12].self_time_us == 0.0  # on the host figures, no device instruction
    hover = hlo_section(got[10], " neuron") or ""
    assert "| `dot.1` | MATMUL | 1 | 150 ns neuron |" in hover
    assert "covers this line; 20 ns on line 30" in hover
    assert "Per engine (union of this line's instructions on each): act 100 ns · pe 100 ns" in hover
    # copy.3 has no frames (and no HLO line): unattributed; per engine the sums reconcile
    assert result.unattributed_us == pytest.approx(0.030)
    assert result.totals.self_time_us == pytest.approx(0.200)  # union of all: [0,170] + [200,230]
    busy = {"pe": 0.100, "act": 0.120, "pool": 0.030}
    for engine, us in busy.items():
        lines = sum(e.time_us for s in result.lines for e in s.engines if e.engine == engine)
        assert lines + (0.030 if engine == "pool" else 0.0) == pytest.approx(us)
    assert not [f for f in result.findings if f.kind == "xla_no_device_profile"]
    path = store.runs / f"{result.run_id}.json"
    assert path.exists()
    text = show(path)
    assert "clock: Neuron device time" in text and "self (neuron)" in text
    assert any(row.split()[:1] == ["10"] for row in text.splitlines()), text
    # the per-engine table: line 10's pe and act time (they overlap: union, not sum)
    engines = text[text.index("per engine (Neuron device time") :]
    header, row10 = (
        engines.splitlines()[1],
        next(r for r in engines.splitlines()[2:] if r.split()[:1] == ["10"]),
    )
    assert header.split() == ["line", "device", "act", "pe"] and len(row10.split()) >= 4, engines


def run_with(tmp_path: Path, monkeypatch, store: RunStore | None = None, **spec) -> tuple:
    """One Trn1 function's capture (``spec``: the stand-in NTFF's schema, drop, ...)
    through the harness's processing and the runner: the result and its views."""
    install_standin(tmp_path, monkeypatch)
    src, run_dir = tmp_path / "src", tmp_path / "run"
    capture(run_dir / "neuron-inspect", src, **spec)
    device = xla_device.DeviceCapture(str(run_dir / "neuron-inspect"), None)
    views = device.process(str(run_dir / "b1-0.neuron-view"))
    doc = host_result(src, run_dir, views)
    [result] = profile(Job(tmp_path, "model.py"), HarnessStandIn([doc]), store=store)
    return result, views, doc


def per_line(result) -> dict:
    return {
        s.line: (s.self_time_us, s.total_time_us, [(e.engine, e.time_us) for e in s.engines])
        for s in result.lines
    }


def test_schema_7_4_0_and_12_0_1_give_the_same_lines(tmp_path, monkeypatch):
    old, _v, _d = run_with(tmp_path / "a", monkeypatch, schema="7.4.0")
    new, _v, _d = run_with(tmp_path / "b", monkeypatch, schema="12.0.1")
    assert old.clock == new.clock == "neuron"
    assert per_line(old) == per_line(new) and per_line(new)[10][0] == pytest.approx(0.150)
    assert (old.totals.self_time_us, old.unattributed_us) == (new.totals.self_time_us, new.unattributed_us)
    assert any("schema 12.0.1" in w for w in new.signals.warnings)
    assert any("first measured step" in w for w in new.signals.warnings)  # which execution


def test_a_missing_needed_column_keeps_the_host_figures_and_names_it(tmp_path, monkeypatch):
    store = RunStore(tmp_path / "ws")
    result, views, doc = run_with(tmp_path, monkeypatch, store, schema="12.0.1", drop=["Instruction.engine"])
    assert result.clock == "xla-neuron"  # the host figures, untouched
    assert [(s.line, s.self_time_us) for s in result.lines] == [(10, 7.0), (12, 2.0)]
    reason = result.signals.neuron_profile_error or ""
    assert "no column Instruction.engine" in reason and "schema 12.0.1" in reason and "\n" not in reason
    [finding] = [f for f in result.findings if f.kind == "xla_no_device_profile"]
    assert "not device time" in finding.message and "Instruction.engine" in finding.message
    text = show(store.runs / f"{result.run_id}.json")
    assert "Instruction.engine" in text and "xla-neuron" in text
    # a damaged table: the same, with pyarrow's reason
    Path(views[0]["parquet"], "Instruction_0.parquet").write_bytes(b"not parquet")
    [damaged] = profile(Job(tmp_path, "model.py"), HarnessStandIn([doc]))
    assert damaged.clock == "xla-neuron" and damaged.line("model.py", 10).self_time_us == 7.0
    assert "cannot read the device profile: ArrowInvalid" in (damaged.signals.neuron_profile_error or "")


def test_a_json_export_is_read_through_the_host_instruction_names(tmp_path, monkeypatch):
    """An SDK that writes JSON where Parquet was asked (up to 2.33): no stack frames, so
    the instructions reach lines through the names the host result credits."""
    install_standin(tmp_path, monkeypatch)
    src, run_dir = tmp_path / "src", tmp_path / "run"
    capture(run_dir / "neuron-inspect", src, format="json")
    views = xla_device.DeviceCapture(str(run_dir / "neuron-inspect"), None).process(str(run_dir / "v"))
    assert Path(views[0]["parquet"]).is_file()
    doc = host_result(src, run_dir, views)
    doc["lines"][0]["instructions"] = [{"name": "dot.1", "credited": True, "line": 10}]
    doc["lines"][1]["instructions"] = [{"name": "fusion.2", "credited": True, "line": 12}]
    [result] = profile(Job(tmp_path, "model.py"), HarnessStandIn([doc]))
    assert result.clock == "neuron" and result.signals.neuron_profile_error is None
    assert result.line("model.py", 10).self_time_us == pytest.approx(0.150)
    assert result.line("model.py", 12).self_time_us == pytest.approx(0.020)
    assert result.unattributed_us == pytest.approx(0.030)  # copy.3: no frame, no host name
    assert any("schema not stated" in w for w in result.signals.warnings)


def test_an_ntff_written_before_the_measured_steps_is_said_to_be_the_cold_execution(tmp_path, monkeypatch):
    """An SDK before 2.33 ignores the warm-up count: the NTFF is there before the
    measured steps begin, and the result says its figures are each graph's first run."""
    install_standin(tmp_path, monkeypatch)
    src, run_dir = tmp_path / "src", tmp_path / "run"
    device = xla_device.DeviceCapture(str(run_dir / "neuron-inspect"), None)
    device.mark()
    capture(run_dir / "neuron-inspect", src)  # written during the compiling calls
    device.before_measured()
    views = device.process(str(run_dir / "b1-0.neuron-view"))
    assert [v["mode"] for v in views] == ["model-first"]
    [result] = profile(Job(tmp_path, "model.py"), HarnessStandIn([host_result(src, run_dir, views)]))
    assert result.clock == "neuron"
    assert any("FIRST execution" in w and "cold-start" in w for w in result.signals.warnings)
    later = xla_device.DeviceCapture(str(tmp_path / "later"), None)
    later.mark()
    later.before_measured()  # nothing yet: the capture comes in the measured step
    capture(tmp_path / "later", src)
    assert [v["mode"] for v in later.process(str(tmp_path / "later-view"))] == ["model"]


def test_work_per_line_from_the_device_profile(tmp_path, monkeypatch):
    """The device profile's raw_flops and HBM read + write bytes reach each line's
    work fields, summed with the stack-frame rule of time; the result says where
    the figures came from."""
    result, _views, _doc = run_with(tmp_path, monkeypatch)
    names = ("flops", "bytes", "backward_flops", "backward_bytes")
    work = {line: {n: getattr(result.line("model.py", line), n) for n in names} for line in (10, 12, 30)}
    assert work[10] == {"flops": 524288, "bytes": 4096 + 2048, "backward_flops": 0.0, "backward_bytes": 0.0}
    assert work[30]["flops"] == 64 and work[12]["flops"] == 0.0
    assert result.work is not None and result.work.source == "neuron-profile"
    assert result.work.flops == sum((s.flops or 0) + (s.backward_flops or 0) for s in result.lines)


@pytest.mark.ssh
def test_a_remote_runs_parquet_folder_is_fetched_over_ssh(sshd, ssh_control_dir, tmp_path, monkeypatch):
    """The Parquet folder lies on the 'host' (the loopback sshd's home): the runner's
    fill fetches it through the SSH target's own fetch."""
    from trainium_lens.engine.device_profile import fill
    from trainium_lens.model.result import Result
    from trainium_lens.targets.ssh.target import SshTarget

    install_standin(tmp_path, monkeypatch)
    src, run_dir = sshd.home / "work" / "src", sshd.home / "work" / "runs" / "b9"
    capture(run_dir / "neuron-inspect", src)
    views = xla_device.DeviceCapture(str(run_dir / "neuron-inspect"), None).process(
        str(run_dir / "b9-0.neuron-view")
    )
    doc = host_result(src, run_dir, views)
    doc["artifacts"]["location"] = doc["host"] = "lens-test"
    result = Result.from_dict(doc)
    target = SshTarget("lens-test", ssh_config=str(sshd.config), work_dir=str(sshd.home / "work"))
    try:
        assert fill(result, functools.partial(target.fetch, workspace=tmp_path))
    finally:
        target.close()
    assert result.clock == "neuron"
    assert result.line("model.py", 10).self_time_us == pytest.approx(0.150)
    gone = Result.from_dict(doc)
    gone.artifacts.neuron_views[0].parquet = str(run_dir / "deleted")
    target = SshTarget("lens-test", ssh_config=str(sshd.config), work_dir=str(sshd.home / "work"))
    try:
        assert not fill(gone, functools.partial(target.fetch, workspace=tmp_path))
    finally:
        target.close()
    assert "cannot fetch" in (gone.signals.neuron_profile_error or "")
    assert gone.line("model.py", 10).self_time_us == 7.0


# STAND-IN for the Trn1 side of the harness process: an empty ``torch_neuronx`` (so
# the harness turns device capture on) and a sitecustomize that plays the Neuron
# runtime, dropping one step's NEFF/NTFF into the capture folder the harness set up
# just before the harness looks for them (SCENARIO: "trace" or "none").
SITECUSTOMIZE = """\
import json, os
SCENARIO, FILE, LIB, L = {scenario!r}, {file!r}, {lib!r}, {lines!r}
from trainium_lens.harness.eager import neuron_view
from trainium_lens.harness.xla import device as xla_device
_process = xla_device.DeviceCapture.process
def process(self, out_root):
    if SCENARIO == "trace":
        os.makedirs(self.inspect_dir, exist_ok=True)
        with open(os.path.join(self.inspect_dir, "neff_99001.neff"), "wb") as fh:
            fh.write(b"stand-in NEFF")
        frames = [[1, 125, 2], [2, L["helper"], 3], [2, L["call1"], 0], [2, L["helper"], 5],
                  [2, L["call2"], 0], [2, L["add"], 0], [2, L["call2"], 0]]
        with open(os.path.join(self.inspect_dir, "99001_instid_0_vnc_0.ntff"), "w") as fh:
            json.dump({{"files": [LIB, FILE], "frames": frames,
                       "instructions": [[0, 400, "pe", "dot.1", [1]], [300, 500, "pe", "dot.2", [4]],
                                        [500, 540, "act", "maximum.3", [7]],
                                        [540, 600, "dve", "add.4", [6]]]}}, fh)
    return _process(self, out_root)
xla_device.DeviceCapture.process = process
"""
DATA_FILE = DATA / "xla_lines.py"


def data_lines() -> dict[str, int]:
    text = DATA_FILE.read_text().splitlines()
    at = {
        tag: next(i for i, s in enumerate(text, 1) if f"# {tag}" in s)
        for tag in ("HELPER-DOT", "CALL-1", "CALL-2", "ADD")
    }
    return {"helper": at["HELPER-DOT"], "call1": at["CALL-1"], "call2": at["CALL-2"], "add": at["ADD"]}


def trn1_standin(tmp_path: Path, monkeypatch, scenario: str) -> None:
    site = tmp_path / "trn1-site"
    (site / "torch_neuronx").mkdir(parents=True)
    (site / "torch_neuronx" / "__init__.py").write_text('"""STAND-IN: only found, never used."""\n')
    (site / "sitecustomize.py").write_text(
        SITECUSTOMIZE.format(scenario=scenario, file=str(DATA_FILE), lib=LIB, lines=data_lines())
    )
    monkeypatch.setenv("PYTHONPATH", str(site))
    monkeypatch.setenv("PJRT_DEVICE", "CPU")  # a Neuron host would pick its own device
    monkeypatch.setenv("TRAINIUM_LENS_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(DATA_FILE.parents[2])


def run_cli(tmp_path: Path, capsys) -> tuple[dict, str]:
    from trainium_lens.cli import main

    out = tmp_path / "r.json"
    code = main(
        [
            "profile",
            "tests/data/xla_lines.py",
            "two_calls",
            "--backend",
            "xla",
            "--python",
            str(XLA_PY),
            "--json",
            str(out),
            "--timing-calls",
            "2",
        ]
    )
    assert code == 0
    data = json.loads(out.read_text())
    return (data[0] if isinstance(data, list) else data), capsys.readouterr().out


@needs_xla
def test_a_trn1_run_end_to_end_gets_device_time_per_line(tmp_path, monkeypatch, capsys):
    """The real harness (torch-xla on CPU) with the capture turned on as on Trn1: its
    NTFF goes through the stand-in neuron-explorer, the runner fills the lines."""
    install_standin(tmp_path, monkeypatch)
    trn1_standin(tmp_path, monkeypatch, "trace")
    r, out = run_cli(tmp_path, capsys)
    assert r["clock"] == "neuron" and r["signals"]["neuron_profile_error"] is None
    [view] = r["artifacts"]["neuron_views"]
    assert view["ntff"].endswith("neuron-inspect/99001_instid_0_vnc_0.ntff") and view["parquet"]
    assert r["artifacts"]["source_root"] == str(Path.cwd().resolve())
    at = data_lines()
    got = {s["line"]: s for s in r["lines"] if s["file"] == "tests/data/xla_lines.py"}
    # the helper's two matmuls overlap 100 ns on pe: its self is their union, 500 ns
    assert got[at["helper"]]["self_time_us"] == pytest.approx(0.5)
    call2 = got[at["call2"]]
    assert (call2["self_time_us"], call2["total_time_us"]) == pytest.approx((0.04, 0.24))
    assert got[at["call1"]]["total_time_us"] == pytest.approx(0.4)
    assert got[at["add"]]["self_time_us"] == pytest.approx(0.06)
    assert got[at["add"]]["self_cpu_us"] > 0  # the host (xla-cpu) figure kept beside it
    assert r["totals"]["self_time_us"] == pytest.approx(0.6)
    assert "clock: Neuron device time" in out


@needs_xla
def test_a_trn1_run_without_a_device_trace_keeps_the_host_figures(tmp_path, monkeypatch, capsys):
    install_standin(tmp_path, monkeypatch)
    trn1_standin(tmp_path, monkeypatch, "none")
    r, out = run_cli(tmp_path, capsys)
    assert r["clock"] == "xla-cpu"
    assert "wrote no device trace (NTFF)" in r["signals"]["neuron_profile_error"]
    assert sum(s["self_time_us"] for s in r["lines"]) > 0  # host figures, not lost
    assert "xla_no_device_profile" in {f["kind"] for f in r["findings"]}
    assert "No per-line Neuron device time" in out


def test_the_xla_backend_lists_the_runs_neffs_and_ntffs_as_artifacts(tmp_path, monkeypatch):
    """The compile cache's MODULE_*/model.neff (no hash to pair by) and the runtime's
    NTFFs, each listed alone; none of them: no artifacts at all."""
    from trainium_lens.harness.xla.backend import XlaBackend

    cache, inspect = tmp_path / "cache", tmp_path / "inspect"
    monkeypatch.setenv("NEURON_COMPILE_CACHE_URL", str(cache))
    monkeypatch.setenv("NEURON_RT_INSPECT_OUTPUT_DIR", str(inspect))
    cache.mkdir()
    inspect.mkdir()
    assert XlaBackend.artifacts(None, str(tmp_path)) == {}  # type: ignore[arg-type]
    for path in (
        cache / "MODULE_1" / "model.neff",
        cache / "MODULE_1" / "model.hlo_module.pb",
        inspect / "p" / "9_instid_0_vnc_1.ntff",
        inspect / "p" / "9_instid_0_vnc_0.ntff",
    ):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")
    assert XlaBackend.artifacts(None, str(tmp_path)) == {  # type: ignore[arg-type]
        "neuron_profile_dir": str(inspect),
        "neff_ntff": [
            {"neff": str(cache / "MODULE_1" / "model.neff"), "ntff": None},
            {"neff": None, "ntff": str(inspect / "p" / "9_instid_0_vnc_0.ntff")},
            {"neff": None, "ntff": str(inspect / "p" / "9_instid_0_vnc_1.ntff")},
        ],
    }
    for ntff in (inspect / "p").iterdir():
        ntff.unlink()
    assert XlaBackend.artifacts(None, str(tmp_path))["neuron_profile_dir"] == str(cache)  # type: ignore[arg-type]

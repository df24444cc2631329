"""Backend xla end to end on torch-xla's CPU device (PJRT_DEVICE=CPU): the real
torch_xla profiler, the real optimized HLO, the real CLI.

They need the torch-xla venv (``bash scripts/setup-xla.sh`` makes ``.venv-xla``);
without it they are skipped, and ``scripts/test.sh`` always makes it first.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, XLA_PY, needs_xla
from tests.support.harness import profile_xla
from trainium_lens.cli import main

DATA = ROOT / "tests" / "data"


def marker_line(path: Path, tag: str) -> int:
    return next(i for i, text in enumerate(path.read_text().splitlines(), 1) if f"# {tag}" in text)


def profile(tmp_path, file: str, function: str, *extra: str) -> dict:
    return profile_xla(tmp_path / f"{function}.json", file, function, *extra)


@pytest.fixture
def in_root(monkeypatch):
    monkeypatch.chdir(ROOT)


@needs_xla
def test_rmsnorm_lines_on_the_xla_cpu_clock(tmp_path, in_root, capsys):
    """The must-show run: every body line holds time or is covered by a fusion that does."""
    r = profile(tmp_path, "examples/rmsnorm.py", "rms_norm_naive")
    assert r["backend"] == "xla" and r["clock"] == "xla-cpu"
    lines = {s["line"]: s for s in r["lines"] if s["file"] == "examples/rmsnorm.py"}
    assert 21 not in lines  # nothing on the def line
    held = {ln for ln, s in lines.items() if s["self_time_us"] > 0}
    covered = {c["line"] for reg in r["regions"] if reg["self_time_us"] > 0 for c in reg["covered_lines"]}
    for line in (22, 23, 24, 25):
        assert line in held or line in covered, (line, held, covered)
    # each fusion is credited to one line and names every line it fused
    for reg in r["regions"]:
        assert {"file": reg["file"], "line": reg["line"]} in reg["covered_lines"]
    # a covered line's hover data names the fusion that holds its time, and where it went
    for line, s in lines.items():
        for ref in s["instructions"]:
            assert ref["credited"] == (ref["line"] == line)
    # sums reconcile: lines' self + unattributed = every executed instruction
    total = sum(s["self_time_us"] for s in r["lines"]) + r["unattributed_us"]
    assert total == pytest.approx(r["totals"]["self_time_us"], rel=1e-6)
    assert len(r["totals"]["per_step_self_time_us"]) == r["totals"]["steps"] == 5
    out = capsys.readouterr().out
    assert "xla-cpu" in out


@needs_xla
def test_helper_self_on_its_line_total_on_both_callers(tmp_path, in_root):
    src = DATA / "xla_lines.py"
    r = profile(tmp_path, "tests/data/xla_lines.py", "two_calls")
    lines = {s["line"]: s for s in r["lines"]}
    helper, call1, call2 = (lines[marker_line(src, t)] for t in ("HELPER-DOT", "CALL-1", "CALL-2"))
    assert helper["self_time_us"] > 0 and helper["function"] == "project"
    assert helper["calls"] == 2  # one dot per call
    assert call1["self_time_us"] == 0 and call1["total_time_us"] > 0
    assert call2["total_time_us"] > 0
    # the callers' totals are the helper's two dots
    assert call1["total_time_us"] + call2["total_time_us"] >= helper["self_time_us"] * 0.99
    assert {i["opcode"] for i in helper["instructions"] if i["credited"]} == {"dot"}


@needs_xla
def test_a_linear_layer_lands_on_the_user_line(tmp_path, in_root):
    src = DATA / "xla_lines.py"
    r = profile(tmp_path, "tests/data/xla_lines.py", "through_linear")
    call = marker_line(src, "LINEAR-CALL")
    lines = {s["line"]: s for s in r["lines"]}
    assert all(s["file"] == "tests/data/xla_lines.py" for s in r["lines"])  # never linear.py
    assert lines[call]["self_time_us"] > 0
    assert any(i["op_type"] == "aten__addmm" for i in lines[call]["instructions"])


@needs_xla
def test_a_graph_that_recompiles_every_step_is_a_finding(tmp_path, in_root):
    r = profile(tmp_path, "tests/data/xla_lines.py", "new_graph_each_step")
    assert r["signals"]["compiles_in_active_steps"] >= r["totals"]["steps"]
    kinds = {f["kind"] for f in r["findings"]}
    assert "xla_recompile_every_step" in kinds


@needs_xla
def test_a_boolean_mask_falls_back_to_the_cpu_on_its_line_and_the_recompiles_name_it(tmp_path, in_root):
    """``y[y > 0]``: torch-xla runs aten::nonzero on the CPU (a graph cut, both ways
    copies), and as the count changes every step so does the next graph's shape."""
    line = marker_line(DATA / "xla_lines.py", "BOOLEAN-MASK")
    r = profile(tmp_path, "tests/data/xla_lines.py", "keep_positive")
    assert r["signals"]["xla_fallbacks"] == [
        {"op": "aten::nonzero", "file": "tests/data/xla_lines.py", "line": line, "calls": 1.0}
    ]
    assert r["signals"]["graphs_per_step"] == 2
    by_kind = {f["kind"]: f for f in r["findings"]}
    assert by_kind["xla_cpu_fallback"]["line"] == line
    assert "xla_host_sync" not in by_kind  # the fallback finding already says it cuts the graph
    assert f"data-dependent shapes: {line}." in by_kind["xla_recompile_every_step"]["message"]


def test_backend_xla_without_torch_xla_names_the_fix(tmp_path, in_root, capsys):
    # the main venv never has torch_xla (it lives in .venv-xla): the harness there must say so
    assert subprocess.run([sys.executable, "-c", "import torch_xla"], capture_output=True).returncode != 0
    code = main(
        ["profile", "examples/rmsnorm.py", "rms_norm_naive", "--backend", "xla", "--python", sys.executable]
    )
    err = capsys.readouterr().err
    assert code != 0
    reason = [line for line in err.splitlines() if "torch_xla" in line]
    assert reason and "scripts/setup-xla.sh" in reason[0]


@needs_xla
def test_timeline_and_hover_show_the_instructions_behind_a_line(tmp_path, in_root):
    from trainium_lens.lsp.present.hover_hlo import hlo_section
    from trainium_lens.model.result import Result
    from trainium_lens.traces.chrome import load_trace

    r = profile(tmp_path, "examples/rmsnorm.py", "rms_norm_naive")
    trace = load_trace(r["artifacts"]["trace"])
    device = [ev for ev in trace.events if trace.lanes[ev.lane].kind == "device"]
    body = {("examples/rmsnorm.py", n) for n in range(22, 26)}
    assert device and {ev.line for ev in device if ev.line} <= body
    assert any(ev.line for ev in device)
    assert trace.line_events("examples/rmsnorm.py", 22)  # the user-line lane holds the line
    result = Result.from_dict(r)
    covered = [s for s in result.lines if any(not i.credited for i in s.instructions)]
    assert covered  # rms_norm fuses several lines into one instruction
    text = hlo_section(covered[0], " xla-cpu") or ""
    assert "covers this line" in text and "fusion" in text


def test_prepare_env_on_a_stand_in_trn1(tmp_path, monkeypatch):
    """Stand-in: torch_neuronx is 'installed' (find_spec answers for it); no Trn1 here."""
    import importlib.machinery

    from trainium_lens.harness.xla import backend as xla

    real = xla.importlib.util.find_spec
    monkeypatch.setattr(
        xla.importlib.util,
        "find_spec",
        lambda name, *a: (
            importlib.machinery.ModuleSpec(name, None) if name == "torch_neuronx" else real(name, *a)
        ),
    )
    for key in (
        "PJRT_DEVICE",
        "NEURON_RT_INSPECT_ENABLE",
        "NEURON_RT_INSPECT_DEVICE_PROFILE",
        "NEURON_RT_INSPECT_OUTPUT_DIR",
        "NEURON_RT_INSPECT_DEVICE_PROFILE_NUM_WARMUP",
        "NEURON_COMPILE_CACHE_URL",
        "XLA_IR_DEBUG",
        "XLA_HLO_DEBUG",
        "NEURON_FRAMEWORK_DEBUG",
    ):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setattr(xla, "_PENDING_CAPTURE", None)  # restored after the test
    xla.prepare_env(str(tmp_path), [{"wait": 3, "warmup": 1}, {"wait": 0, "warmup": 1}])
    # kept for XlaBackend (set up before its PJRT client starts the runtime); the smallest
    # warm-up, so every function's profiled execution comes after its compiling calls
    assert xla._PENDING_CAPTURE == (str(tmp_path), {"wait": 0, "warmup": 1})
    assert os.environ["XLA_IR_DEBUG"] == os.environ["XLA_HLO_DEBUG"] == "1"
    assert "PJRT_DEVICE" not in os.environ  # torch-neuronx picks its own device
    assert os.environ["NEURON_COMPILE_CACHE_URL"] == str(tmp_path / "xla-compile-cache")
    assert "NEURON_RT_INSPECT_ENABLE" not in os.environ  # not before the backend is xla
    capture = xla.prepare_neuron_capture(str(tmp_path), {"wait": 2, "warmup": 1, "active": 5})
    # model mode: each NEFF's first measured step (2 compiling calls + wait + warmup before it)
    assert os.environ["NEURON_RT_INSPECT_DEVICE_PROFILE"] == "model"
    assert os.environ["NEURON_RT_INSPECT_DEVICE_PROFILE_NUM_WARMUP"] == "5"
    assert os.environ["NEURON_RT_INSPECT_OUTPUT_DIR"] == str(tmp_path / "neuron-inspect")
    assert capture is not None and capture.inspect_dir == str(tmp_path / "neuron-inspect")


@needs_xla
def test_doctor_reports_torch_xla_through_the_real_probe(tmp_path):
    from trainium_lens.hosttools.doctor.run import run_doctor
    from trainium_lens.targets.where import Where

    report = run_doctor(Where(work_dir=str(tmp_path), python=str(XLA_PY)))
    row = report.get("torch_xla")
    assert row is not None and row.status == "pass", row
    assert "torch-xla 2.9.0" in row.detail and "XLA_HLO_DEBUG" in row.detail
    assert report.facts["xla_ir_debug_api"] is True

"""``trainium-lens run --backend xla -- python train_xla.py``: nanoGPT's training loop
as torch-xla's documentation writes one (``tests/data/nanogpt/train_xla.py``, the
vendored model.py unmodified), on torch-xla's CPU device with the real torch_xla
profiler: each step ends at the script's own ``torch_xla.sync()``, the window's
executed HLO instructions land on the model file's lines, and the script runs to
its end with its own output."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import DATA, ROOT, XLA_PY, needs_xla
from tests.support.procs import left_running

NANOGPT = DATA / "nanogpt"
MODEL = "model.py"


def line_of(path: Path, text: str) -> int:
    return next(i for i, s in enumerate(path.read_text().splitlines(), 1) if text in s)


@pytest.fixture(scope="module")
def xla_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess, dict, Path]:
    tmp = tmp_path_factory.mktemp("xla-run")
    ws = tmp / "nanogpt"
    shutil.copytree(NANOGPT, ws)
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    out = tmp / "out.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "server"), "TRAINIUM_LENS_CACHE": str(tmp / "cache")}
    proc = subprocess.run(
        [sys.executable, "-m", "trainium_lens", "run", "--backend", "xla", "--json", str(out), "--"]
        + [str(XLA_PY), "train_xla.py", "--max-iters", "10"],
        cwd=ws,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    doc = json.loads(out.read_text())
    return proc, doc["results"][0] if "results" in doc else doc, ws


@needs_xla
def test_steps_end_at_the_scripts_sync_and_the_script_runs_to_its_end(xla_run) -> None:
    proc, r, ws = xla_run
    for k in (0, 2, 9):  # before, inside and after the window
        assert f"iter {k}: loss" in proc.stdout
    assert (r["backend"], r["clock"]) == ("xla", "xla-cpu")
    script = r["script"]
    assert script["detector"] == "optimizer" and script["profiled_steps"] == [3, 5]
    # steps 1 and 2 compile (traced with frames and tags); the reference is after the window
    assert script["reference_after"] >= 1 and r["totals"]["wall_us_median"] > 0
    assert r["signals"]["graphs_per_step"] == 1  # the script's one sync per step
    assert r["signals"]["compiles_in_active_steps"] == 0 and r["signals"]["recompiles"] == 0
    assert r["reconciliation"]["reference"] == "wall"  # against the script's unprofiled steps
    assert r["reconciliation"]["reference_us"] == r["totals"]["wall_us_median"]
    assert not left_running(str(ws.parent / "cache"))


@needs_xla
def test_forward_and_backward_on_the_model_files_lines_and_the_optimizer_on_its_line(xla_run) -> None:
    _proc, r, ws = xla_run
    lines = {(s["file"], s["line"]): s for s in r["lines"]}
    c_fc = lines[(MODEL, line_of(ws / MODEL, "x = self.c_fc(x)"))]
    assert c_fc["self_time_us"] > 0 and c_fc["backward_self_time_us"] > 0
    # FLOPs from the window's HLO: 2·m·k·n per linear (m = 4·64 tokens, 128 → 512), two layers
    assert c_fc["flops"] == 2 * (2 * 256 * 128 * 512) and c_fc["backward_flops"] == 2 * c_fc["flops"]
    step = lines[("train_xla.py", line_of(ws / "train_xla.py", "optimizer.step()"))]
    assert step["self_time_us"] > 0 and r["totals"]["optimizer_time_us"] > 0
    # every executed instruction once: lines (forward and backward), graph plumbing, the rest
    lines_us = sum(s["self_time_us"] + (s.get("backward_self_time_us") or 0) for s in r["lines"])
    total = lines_us + sum(b["self_time_us"] for b in r["buckets"]) + r["unattributed_us"]
    assert total == pytest.approx(r["totals"]["self_time_us"], rel=1e-6)
    assert r["unattributed_us"] <= 0.1 * r["totals"]["self_time_us"]


@needs_xla
def test_no_line_reads_above_the_flops_peak_without_saying_which_measure_is_off(xla_run) -> None:
    """A line's FLOPs and time come from the same instructions, an async dot's untraced
    contraction included (its event only dispatches it): before, backward lines read
    114-133 % of the peak; a line still above it carries a warning naming the measure."""
    _proc, r, _ws = xla_run
    peak = {p["dtype"]: p["flops_per_s"] for p in r["roof"]["flops"]}["float32"]
    warned = " ".join(r["signals"]["warnings"])
    checked = 0
    for s in r["lines"]:
        for phase, flops, t in (
            ("forward", s.get("flops"), s.get("self_time_us_median")),
            ("backward", s.get("backward_flops"), s.get("backward_self_time_us_median")),
        ):
            if flops and t:
                checked += 1
                if flops / (t * 1e-6) > peak:
                    assert f"{s['file']}:{s['line']} {phase} reads" in warned, (s["line"], phase)
    assert checked >= 10  # six linear/attention lines, forward and backward


@needs_xla
def test_the_loss_read_after_the_sync_is_a_wait_on_its_line(xla_run) -> None:
    _proc, r, ws = xla_run
    [sync] = [f for f in r["findings"] if f["kind"] == "xla_host_sync"]
    assert sync["line"] == line_of(ws / "train_xla.py", "lossf = loss.item()")
    assert "waits for the device" in sync["message"]


@needs_xla
def test_a_torch_xla_script_without_backend_xla_says_so_and_runs_to_its_end(tmp_path: Path) -> None:
    """On the CPU clock a torch-xla step only traces (its graph runs at the sync): the
    figures would be the tracing's. The run stops profiling at the first step with the
    hint and the script trains to its end, unprofiled."""
    ws = tmp_path / "ws"
    ws.mkdir()
    shutil.copy(DATA / "scripts" / "xla_tiny.py", ws)
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "server"), "TRAINIUM_LENS_CACHE": str(tmp_path / "cache")}
    proc = subprocess.run(
        [sys.executable, "-m", "trainium_lens", "run", "--json", str(tmp_path / "out.json"), "--"]
        + [str(XLA_PY), "xla_tiny.py"],
        cwd=ws,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "step 7 loss" in proc.stdout  # the script's own last step
    said = [ln for ln in proc.stderr.splitlines() if ln.startswith("trainium-lens: ")]
    assert "this script runs on torch-xla: use --backend xla" in said[-1]
    assert not (tmp_path / "out.json").exists()
    assert not left_running(str(tmp_path / "cache"))


@pytest.fixture(scope="module", params=["step", "mark_step", "nxd"])
def loop_run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple:
    """The same loop ending its steps another way torch-xla's docs write: the body inside
    ``with torch_xla.step():`` (which syncs on entry and on exit), with the user's own
    ``PT_XLA_DEBUG_LEVEL=1`` set; data-parallel as ``xm.optimizer_step(optimizer)`` +
    ``xm.mark_step()`` under ``torchrun --nproc-per-node 2``; or NxD's, under torchrun too: a
    ``MpDeviceLoader`` syncing at each batch, 2 batches per update, ``xm.mark_step()`` before
    the optimizer's step (its graph runs at the loader's next batch), the optimizer wrapped by a
    stand-in for NxD's ``NxDOptimizer`` (never ran ``Optimizer.__init__``)."""
    tmp = tmp_path_factory.mktemp(f"xla-{request.param}")
    ws = tmp / "nanogpt"
    shutil.copytree(NANOGPT, ws)
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    out = tmp / "out.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "server"), "TRAINIUM_LENS_CACHE": str(tmp / "cache")}
    launch = [str(XLA_PY)]
    if request.param in ("mark_step", "nxd"):
        launch = [str(XLA_PY.parent / "torchrun"), "--nproc-per-node", "2"]
    if request.param == "step":  # the user's own torch-xla debug log: theirs, on their terminal
        env["PT_XLA_DEBUG_LEVEL"] = "1"
    accumulate = ["--grad-accum", "2"] if request.param == "nxd" else []
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "trainium_lens",
            "run",
            "--backend",
            "xla",
            "--steps",
            "3:5",
            "--json",
            str(out),
        ]
        + ["--", *launch, "train_xla.py", "--max-iters", "8", "--loop", request.param, *accumulate],
        cwd=ws,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return request.param, proc, out, ws


@needs_xla
def test_every_step_shape_is_profiled_and_the_script_trains_to_its_end(loop_run) -> None:
    loop, proc, out, ws = loop_run
    # the script's own output to its last step, its own status: the tool broke nothing
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    ranks = 1 if loop == "step" else 2
    assert proc.stdout.count("iter 7: loss") == ranks  # nxd: iter counts updates, 16 batches
    assert "calls no torch_xla.sync()" not in proc.stderr  # its own syncs end its steps
    doc = json.loads(out.read_text())
    r = doc["results"][0] if "results" in doc else doc
    assert r["script"]["detector"] == "optimizer" and r["script"]["profiled_steps"] == [3, 5]
    # a step is an update: nxd's two micro-batch graphs and the optimizer's, run at the next batch
    assert r["totals"]["steps"] == 3
    graphs = 3 if loop == "nxd" else 1
    assert r["signals"]["graphs_per_step"] == graphs
    # torch-xla's own log of executions (PT_XLA_DEBUG_LEVEL=2 to a file of each process) repeats
    # one pattern per step: the steps found are one turn each; where the script set the level
    # itself, its log stays on its terminal and the graphs are counted by torch-xla's metrics
    check = r["script"]["xla_log"]
    assert check["agrees"] and check["graphs_per_step"] == [graphs] * 3
    if loop == "step":
        assert check["source"] == "metrics" and "PT_XLA_DEBUG_LEVEL" in check["why"]
        assert "Compilation Analysis" in proc.stderr  # torch-xla's own, where the user asked for it
    else:
        assert check["source"] == "PT_XLA_DEBUG_LEVEL=2" and check["period"] == graphs
        assert "Analysis: " not in proc.stdout + proc.stderr
    if loop == "nxd":  # the two micro-batches, cut by the loader and the script's mark_step, then the update
        loader = "torch_xla.sync in parallel loader at step end"
        assert [g["cause"] for g in check["pattern"]] == [loader, "user torch_xla.sync", loader]
    lines = {(s["file"], s["line"]): s for s in r["lines"]}
    c_fc = lines[(MODEL, line_of(ws / MODEL, "x = self.c_fc(x)"))]
    assert c_fc["self_time_us"] > 0 and c_fc["backward_self_time_us"] > 0
    # every micro-batch's forward in its update: 2·m·k·n per linear, two layers
    assert c_fc["flops"] == (2 if loop == "nxd" else 1) * 2 * (2 * 256 * 128 * 512)
    if ranks > 1:  # each worker its own capture, merged per line per rank
        assert [p["rank"] for p in c_fc["per_rank"]] == [0, 1]
        assert all(p["self_time_us"] > 0 for p in c_fc["per_rank"])
    # the loss's .item() is the script's one host sync: the graphs its syncs sent run after
    # they returned (nxd: at each batch), never counted on the call the host traced next
    item = ("train_xla.py", line_of(ws / "train_xla.py", "lossf = loss.item()"))
    assert {(s["file"], s["line"]) for s in r["signals"]["host_syncs"]} <= {item}
    stepping = {"mark_step": "xm.optimizer_step(optimizer)", "nxd": "return self.inner.step(closure)"}
    # nxd: on the stand-in wrapper's call of the inner optimizer, its innermost frame in the workspace
    line = line_of(ws / "train_xla.py", stepping.get(loop, "optimizer.step()"))
    assert lines[("train_xla.py", line)]["self_time_us"] > 0
    assert r["totals"]["optimizer_time_us"] > 0
    assert not left_running(str(out.parent / "cache"))


@needs_xla
def test_with_neither_optimizer_nor_module_the_logs_repeating_pattern_is_the_step(tmp_path: Path) -> None:
    """``tests/data/scripts/xla_functional.py``: two graphs per batch, each cut by
    ``xm.mark_step()``, no optimizer, no ``nn.Module``: no hook of the detector fires, and
    torch-xla's execution log (``harness/xla/debug_log.py``) finds the step, both graphs in it."""
    ws = tmp_path / "ws"
    ws.mkdir()
    shutil.copy(DATA / "scripts" / "xla_functional.py", ws)
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    out = tmp_path / "out.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "server"), "TRAINIUM_LENS_CACHE": str(tmp_path / "cache")}
    proc = subprocess.run(
        [sys.executable, "-m", "trainium_lens", "run", "--no-store", "--backend", "xla", "--steps", "3:5"]
        + ["--json", str(out), "--", str(XLA_PY), "xla_functional.py"],
        cwd=ws,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "batch 13:" in proc.stdout  # the script's own end
    doc = json.loads(out.read_text())
    r = doc["results"][0] if "results" in doc else doc
    assert r["script"]["detector"] == "xla-log" and r["totals"]["steps"] == 3
    assert r["signals"]["graphs_per_step"] == 2
    check = r["script"]["xla_log"]
    assert check["period"] == 2 and check["agrees"] and check["graphs_per_step"] == [2, 2, 2]
    lines = {s["line"]: s for s in r["lines"] if s["file"] == "xla_functional.py"}
    layers = line_of(ws / "xla_functional.py", "y = torch.relu(x @ w1) @ w2")
    # both matmuls of each step: 2·64·256·512 FLOPs each
    assert lines[layers]["self_time_us"] > 0 and lines[layers]["flops"] == 2 * (2 * 64 * 256 * 512)
    assert lines[line_of(ws / "xla_functional.py", "score = (y * y).mean()")]["self_time_us"] > 0
    assert not left_running(str(tmp_path / "cache"))

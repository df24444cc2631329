"""A public model file on the xla backend, as a user runs it: karpathy's nanoGPT
``model.py`` (tests/data/nanogpt, small config) through the real CLI, torch-xla
2.9 on its CPU device. Its forward, an AdamW training step, and the same step
with a ``loss.item()`` in the middle, in one harness run.

What holds (issue "Trn1 (XLA) on real models"): nothing silently unattributed;
the backward of each linear layer on its forward line (two dots per forward dot:
the input's and the weight's gradient, by the autograd math, an independent
count); the forward/backward/optimizer split adds up; no eager advice on a
compiled graph; the ``.item()`` gets its finding on its line; the CLI output fits
a screen or two.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
from pathlib import Path

import pytest

from tests.conftest import ROOT, XLA_PY, needs_xla
from trainium_lens.cli import main
from trainium_lens.engine.finish import KEEP_RUNS_ENV
from trainium_lens.model import figures

FILE = "tests/data/nanogpt/profile_gpt.py"
MODEL = "tests/data/nanogpt/model.py"
LINEARS = {56: "c_attn", 75: "attn c_proj", 88: "c_fc", 90: "mlp c_proj", 186: "lm_head"}
EAGER_ADVICE = {"dispatches", "fused_op", "optimizer_loop", "recompile", "compile_in_steps"}


def source_line(path: str, tag: str) -> int:
    text = (ROOT / path).read_text().splitlines()
    return next(i for i, line in enumerate(text, 1) if tag in line)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, dict]:
    """The forward and the training step, unstored; their run folders kept (the tests
    read the traces there: an unstored run's folder is removed unless asked)."""
    out = tmp_path_factory.mktemp("nanogpt") / "all.json"
    args = ["profile", FILE, "--backend", "xla", "--python", str(XLA_PY), "--json", str(out)]
    args += ["--timing-calls", "3", "--no-store", "--workspace", str(ROOT)]
    with contextlib.chdir(ROOT), contextlib.redirect_stdout(io.StringIO()), _keep_runs():
        assert main(args) == 0
    return {r["function"]["name"]: r for r in json.loads(out.read_text())}


@contextlib.contextmanager
def _keep_runs():
    old = os.environ.get(KEEP_RUNS_ENV)
    os.environ[KEEP_RUNS_ENV] = "1"
    try:
        yield
    finally:
        if old is None:
            del os.environ[KEEP_RUNS_ENV]
        else:
            os.environ[KEEP_RUNS_ENV] = old


def shown(result: dict, tmp_path: Path, *extra: str) -> list[str]:
    """What ``profile`` printed for this result (``show`` re-prints it exactly)."""
    path = tmp_path / f"{result['function']['name']}.json"
    path.write_text(json.dumps(result))
    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        assert main(["show", str(path), *extra]) == 0
    return text.getvalue().splitlines()


def unattributed_share(r: dict) -> float:
    return r["unattributed_us"] / r["totals"]["self_time_us"]


def busy_per_step(r: dict) -> tuple[float, float]:
    """The independent figures, from the run's trace, per step: the union of every
    executed instruction's interval across all threads (what the profiler saw busy),
    and the sum over threads of each thread's own union (every instruction once,
    one nested in another on its thread not twice). The per-instruction times the
    lines add up lie between them: below the first they lost time, above the second
    they counted a wrapper and its work twice. Where between is how much the
    runtime's threads overlapped, which the machine's load decides (CI read 1.18×)."""
    from trainium_lens.harness.intervals import union_length

    events = json.loads(Path(r["artifacts"]["trace"]).read_text())["traceEvents"]
    by_thread: dict[int, list[tuple[float, float]]] = {}
    for e in (e for e in events if e.get("cat") == "device"):
        by_thread.setdefault(e["tid"], []).append((e["ts"], e["ts"] + e["dur"]))
    steps = r["totals"]["steps"]
    union = union_length([span for spans in by_thread.values() for span in spans])
    return union / steps, sum(union_length(spans) for spans in by_thread.values()) / steps


def lines_of(r: dict, path: str = MODEL) -> dict[int, dict]:
    return {s["line"]: s for s in r["lines"] if s["file"] == path}


@needs_xla
def test_forward_nothing_silently_unattributed_and_a_screen_long(runs, tmp_path):
    r = runs["forward"]
    assert r["backend"] == "xla" and r["totals"]["self_time_us"] > 0
    assert unattributed_share(r) <= 0.05
    # lines + named buckets + unattributed = every executed instruction
    parts = sum(s["self_time_us"] for s in r["lines"]) + sum(b["self_time_us"] for b in r["buckets"])
    assert parts + r["unattributed_us"] == pytest.approx(r["totals"]["self_time_us"], rel=1e-6)
    assert all(lines_of(r)[n]["self_time_us"] > 0 for n in LINEARS)
    union, per_thread = busy_per_step(r)
    assert union * 0.99 <= r["totals"]["self_time_us"] <= per_thread * 1.01
    assert not {f["kind"] for f in r["findings"]} & EAGER_ADVICE
    assert r["signals"]["graphs_per_step"] == 1 and not r["signals"]["host_syncs"]
    text = shown(r, tmp_path)
    assert len(text) <= 150, "\n".join(text)
    assert any("more instructions" in ln for ln in text)  # the rest is in --verbose and the JSON
    assert len(shown(r, tmp_path, "--verbose")) > len(text)


@needs_xla
def test_training_step_backward_lands_on_the_forward_lines(runs, tmp_path):
    r = runs["train_step"]
    t = r["totals"]
    assert unattributed_share(r) <= 0.05
    assert t["forward_time_us"] > 0 and t["backward_time_us"] > 0 and t["optimizer_time_us"] > 0
    split = t["forward_time_us"] + t["backward_time_us"] + t["optimizer_time_us"]
    assert split == pytest.approx(t["self_time_us"], rel=1e-6)
    union, per_thread = busy_per_step(r)
    assert union * 0.99 <= t["self_time_us"] <= per_thread * 1.01
    model = lines_of(r)
    for n, name in LINEARS.items():
        line = model[n]
        assert line["backward_self_time_us"] > 0, name
        fwd = [
            i
            for i in line["instructions"]
            if i["credited"] and i["phase"] == "forward" and i["opcode"] == "dot"
        ]
        bwd = [
            i
            for i in line["instructions"]
            if i["credited"] and i["phase"] == "backward" and i["opcode"] == "dot"
        ]
        assert fwd and len(bwd) == 2 * len(fwd), (name, len(fwd), len(bwd))  # dX and dW per forward dot
        assert "MmBackward0" in {op["node"] for op in line["backward_ops"]}
    # the backward() call itself holds next to nothing (no backward parked there)
    step_lines = lines_of(r, FILE)
    call = step_lines.get(source_line(FILE, "loss.backward()"))
    held = (call["self_time_us"] + call["backward_self_time_us"]) if call else 0.0
    assert held <= 0.10 * t["self_time_us"]
    # the optimizer's work is on the optimizer.step() line, named as torch names the range
    [opt] = [o for o in r["optimizers"] if o["name"] == "Optimizer.step#AdamW.step"]
    assert step_lines[opt["line"]]["text"].strip() == "optimizer.step()" and opt["calls"] == 1
    assert opt["self_time_us"] == pytest.approx(t["optimizer_time_us"], rel=1e-6)
    assert not {f["kind"] for f in r["findings"]} & EAGER_ADVICE
    text = shown(r, tmp_path)
    assert len(text) <= 150, "\n".join(text)
    assert any(ln.strip().startswith("step: forward") for ln in text)
    # instruction time far under the wall: the line says where the rest went (tracing)
    rec = r["reconciliation"]
    reconciled = next(ln for ln in text if ln.strip().startswith("reconciled:"))
    assert rec["within"] and f"= {figures.number(rec['ratio'])}" in reconciled  # the one voice for numbers
    assert ("tracing the lazy graph" in reconciled) == (rec["ratio"] < 0.5), reconciled
    # the timeline: backward instructions carry their forward line and the phase
    from trainium_lens.traces.chrome import load_trace

    trace = load_trace(r["artifacts"]["trace"])
    backward = {ev.line for ev in trace.events if ev.phase == "backward"}
    assert {(MODEL, n) for n in LINEARS} <= backward


@needs_xla
def test_a_loss_item_mid_step_is_a_host_sync_on_its_line(runs):
    r = runs["train_step_logged"]
    line = source_line(FILE, "# LOSS-ITEM")
    [sync] = [f for f in r["findings"] if f["kind"] == "xla_host_sync"]
    assert (sync["file"], sync["line"]) == (FILE, line)
    assert r["signals"]["graphs_per_step"] == 2  # the .item() cut the step in two
    [signal] = r["signals"]["host_syncs"]
    assert signal["line"] == line and signal["what"] == ["item"] and signal["graphs"] == 1
    assert unattributed_share(r) <= 0.05
    # after .item() the rest of the step is train_step's graph exactly: torch-xla runs the
    # program compiled for train_step (profiled first in this batch), and the run says so
    assert any("first compiled while profiling train_step" in w for w in r["signals"]["warnings"])


@needs_xla
def test_training_step_work_goes_to_the_phase_its_time_goes_to(runs):
    """A linear layer's backward is two dots of its forward dot's size (the input's and
    the weight's gradient: the autograd math, an independent count): they land in the
    line's backward FLOPs, beside its backward time, not on its forward figure (which
    read three times the FLOP/s its forward time allows)."""
    r = runs["train_step"]
    lines = lines_of(r)
    for n in LINEARS:
        s = lines[n]
        assert s["flops"] > 0 and s["backward_self_time_us"] > 0, (n, s)
        assert s["backward_flops"] == pytest.approx(2 * s["flops"], rel=0.01), (n, LINEARS[n], s)
    forward_only = lines_of(runs["forward"])
    assert all(forward_only[n]["flops"] == lines[n]["flops"] for n in LINEARS)
    assert r["work"]["flops"] >= sum(s["flops"] + s["backward_flops"] for s in r["lines"])

"""``trainium-lens run -- COMMAND``: a real, unmodified training script (argparse,
its model in another module, a DataLoader, AdamW, prints its loss) run as a
user runs it, under python and torchrun (gloo), with the real profiler; and the
bad inputs, each one line, nothing stored, nothing left running."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import DATA, ROOT
from tests.support.harness import line_of
from tests.support.procs import left_running
from trainium_lens.traces.chrome import load_trace

SCRIPTS = DATA / "scripts"
BIN = Path(sys.executable).parent


def project(tmp_path: Path) -> Path:
    ws = tmp_path / "proj"
    shutil.copytree(SCRIPTS, ws)
    subprocess.run(["git", "init", "-q", str(ws)], check=True)  # a user's repository: its workspace root
    return ws


def lens_run(
    ws: Path, tmp: Path, *args: str, env: dict | None = None, timeout: float = 400, cwd: Path | None = None
):
    full = {
        **os.environ,
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",  # `python` is the user's venv python
        "PYTHONPATH": str(ROOT / "server"),
        "TRAINIUM_LENS_CACHE": str(tmp / "cache"),
        **(env or {}),
    }
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "trainium_lens", "run", *args],
        cwd=cwd or ws,
        env=full,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return proc, time.monotonic() - t0


def stored(ws: Path) -> list[Path]:
    return sorted((ws / ".trainium-lens" / "runs").glob("*.json")) if (ws / ".trainium-lens").exists() else []


def run_folders(tmp: Path) -> list[str]:
    """The run folders left in the cache (``<cache>/<workspace id>/runs/<batch>``)."""
    return sorted(p.name for p in (tmp / "cache").glob("*/runs/*"))


def test_training_script_per_line_and_reconciled(tmp_path: Path) -> None:
    ws = project(tmp_path)
    out = tmp_path / "out.json"
    proc, _ = lens_run(
        ws,
        tmp_path,
        "--steps",
        "3:4",
        "--json",
        str(out),
        "--",
        "python",
        "train.py",
        "--steps",
        "14",
        cwd=ws / "tinylm",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    # the script's own output, before, during and after the window
    for k in (1, 4, 14):
        assert f"step {k} loss" in proc.stdout
    assert "done" in proc.stderr
    doc = json.loads(out.read_text())
    assert doc["script"]["detector"] == "optimizer"
    assert doc["script"]["steps"] == [3, 4]
    assert doc["function"]["file"] == "tinylm/train.py"
    lines = {(ln["file"], ln["line"]): ln for ln in doc["lines"]}
    model = [ln for (f, _), ln in lines.items() if f == "tinylm/model.py"]
    assert any(ln["self_time_us"] > 0 for ln in model)
    assert any(ln["backward_self_time_us"] > 0 for ln in model)
    src = (ws / "tinylm" / "train.py").read_text().splitlines()
    step_line = next(i for i, s in enumerate(src, 1) if s.strip() == "optimizer.step()")
    loader_line = next(i for i, s in enumerate(src, 1) if s.strip().startswith("for x, y in loader"))
    assert lines[("tinylm/train.py", step_line)]["self_time_us"] > 0
    assert doc["totals"]["optimizer_time_us"] > 0
    # AdamW's step implementations timed on copies at the window's end, as for a marked function
    (adamw,) = [o for o in doc["optimizers"] if o["name"] == "Optimizer.step#AdamW.step"]
    assert adamw["line"] == step_line
    assert {t["config"] for t in adamw["trials"]} == {"foreach=False", "foreach=True", "fused=True"}
    assert all(t["time_us"] > 0 and t["steps"] >= 10 for t in adamw["trials"]), adamw["trials"]
    assert [t["config"] for t in adamw["trials"] if t["current"]] == ["foreach=False"]  # AdamW's cpu default
    assert lines[("tinylm/train.py", loader_line)]["self_time_us"] > 0  # the step's wait for data
    total = doc["unattributed_us"] + sum(
        ln["self_time_us"] + ln["backward_self_time_us"] + ln["recompute_time_us"] for ln in doc["lines"]
    )
    assert total == pytest.approx(doc["totals"]["self_time_us"], rel=1e-6, abs=0.01)
    rec = doc["reconciliation"]
    assert rec["reference"] == "wall" and rec["reference_us"] == doc["totals"]["wall_us_median"] > 0
    # the same contract as a marked function's: compared, the figure the fit did not touch (the
    # calibration as read, the host time as its gaps read it, not bounded by the reference steps)
    fit, t = doc["fit"], doc["totals"]
    assert fit["ops_us"] == pytest.approx(t["self_time_us"])  # a script's calibration is applied as read
    assert fit["host_us"] == pytest.approx(doc["calibration"]["host_read_us"])
    assert fit["fitted_us"] == pytest.approx(t["self_time_us"] + (t["host_time_us"] or 0.0))
    assert (
        rec["profiled_us"]
        == pytest.approx(fit["unfitted_us"])
        == pytest.approx(fit["ops_us"] + fit["host_us"])
    )
    assert doc["script"]["reference_before"] + doc["script"]["reference_after"] >= 2
    assert len(stored(ws)) == 1
    assert "tinylm/model.py" in proc.stdout  # the same table as profile
    # FLOPs per line of the step after the window, exact: TinyNet(64 -> 128, 2 x (128 -> 256 -> 128), -> 10)
    # at batch 32; a linear's backward is two matmuls, one for the first (its input needs no grad)
    work = {ln["text"].strip(): ln for ln in model if ln.get("flops") or ln.get("backward_flops")}

    def mm(i: int, o: int) -> int:  # a (32 x i) @ (i x o) matmul
        return 2 * 32 * i * o

    assert work["x = self.inp(x)"]["flops"] == mm(64, 128)
    assert work["x = self.inp(x)"]["backward_flops"] == mm(64, 128)
    assert work["h = torch.relu(self.up(h))"]["flops"] == 2 * mm(128, 256)  # two blocks
    assert work["h = torch.relu(self.up(h))"]["backward_flops"] == 4 * mm(128, 256)
    assert work["return self.head(x)"]["backward_flops"] == 2 * mm(128, 10)
    assert work["x = self.inp(x)"]["saved_bytes"] == 32 * 64 * 4  # the input, kept for the weight's grad
    assert doc["memory"]["source"].endswith("of the step after the window")
    assert doc["memory"]["peak_phase"] == "optimizer" and doc["memory"]["peak_line"] == step_line
    assert "work and roofline (per step;" in proc.stdout
    assert "figures are per step" in proc.stdout  # a script's figures are per step, not per call
    # the window's Chrome trace, its op events on their lines (the timeline opens it)
    trace = load_trace(doc["artifacts"]["trace"])
    hot = max(model, key=lambda ln: ln["self_time_us"])
    assert trace.line_events("tinylm/model.py", hot["line"]), hot


def test_exit_after_ends_at_the_window(tmp_path: Path) -> None:
    ws = project(tmp_path)
    proc, _ = lens_run(
        ws, tmp_path, "--steps", "2:2", "--exit-after", "--", "python", "tinylm/train.py", "--steps", "50"
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    # steps 2 and its twin 3 recorded, step 4 the work step; the process ends right after
    # step 4's optimizer.step()
    assert "step 3 loss" in proc.stdout and "step 4 loss" not in proc.stdout
    assert len(stored(ws)) == 1


def test_a_script_ending_in_the_work_step_keeps_its_result_and_says_why_figures_are_missing(
    tmp_path: Path,
) -> None:
    ws = project(tmp_path)
    out = tmp_path / "out.json"
    # window 2:2 records steps 2-3; step 4 would be the work step, and the script ends after it
    proc, _ = lens_run(
        ws, tmp_path, "--steps", "2:2", "--json", str(out), "--", "python", "tinylm/train.py", "--steps", "3"
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "the script ended during the step after the window: no FLOP/byte/memory figures" in proc.stderr
    doc = json.loads(out.read_text())
    assert doc["lines"] and doc.get("work") is None
    assert len(stored(ws)) == 1


def test_torchruns_own_store_error_is_named_with_its_node_not_called_the_scripts(tmp_path: Path) -> None:
    """torchrun's agent ends on its c10d store before any rank starts (a client of a
    store nobody hosts: the real ``RendezvousConnectionError``, as when the node that
    hosts the store has gone): the agent's error is named with its node, not
    "the script ended before it imported torch"."""
    import socket

    ws = project(tmp_path)
    with socket.socket() as probe:  # a free port: nothing listens there
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc, _ = lens_run(
        ws,
        tmp_path,
        "--no-store",
        "--",
        "torchrun",
        "--nnodes",
        "1",
        "--nproc-per-node",
        "1",
        "--rdzv-backend",
        "c10d",
        "--rdzv-endpoint",
        f"127.0.0.1:{port}",
        "--rdzv-conf",
        "is_host=0,read_timeout=2",
        "train.py",
        cwd=ws / "tinylm",
        timeout=120,
    )
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"trainium-lens: torchrun's agent on {socket.gethostname()} raised "), last
    assert "RendezvousConnectionError" in last and "before any rank ran the script" in last, last
    assert stored(ws) == [] and left_running(str(tmp_path / "cache")) == []


@pytest.fixture(scope="module")
def aborted_torchrun(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[subprocess.CompletedProcess, dict, Path, Path]:
    """One 2-rank torchrun run whose rank 1 aborts as Python shuts down, after its script
    ended (``--abort-at-exit``: what torch's gloo threads do in some plain runs), read by
    the two tests below (each torchrun run costs ~20 s of CPU): (the CLI's process, the
    result written with --json, the workspace, the test's tmp dir)."""
    tmp = tmp_path_factory.mktemp("torchrun")
    ws = project(tmp)
    out = tmp / "out.json"
    proc, _ = lens_run(
        ws, tmp, "--steps", "3:3", "--json", str(out), "--",
        "torchrun", "--nproc-per-node", "2", "train.py", "--steps", "12", "--abort-at-exit", "1",
        cwd=ws / "tinylm",
    )  # fmt: skip
    return proc, json.loads(out.read_text()) if out.exists() else {}, ws, tmp


def test_a_rank_aborted_at_exit_after_its_script_is_named_and_the_result_kept(aborted_torchrun) -> None:
    """torchrun fails the job, and the CLI says every rank's script ran to its end, which
    rank aborted, and keeps the result."""
    import socket

    proc, doc, ws, tmp = aborted_torchrun
    assert proc.returncode == 1, proc.stderr[-3000:]
    said = " ".join(proc.stderr.split())
    assert "every rank's script ran to its end (2 of 2) and the result is complete" in said, said[-3000:]
    assert f"rank 1 on {socket.gethostname()} was aborted (SIGABRT) as Python shut down" in said
    assert doc["world_size"] == 2 and len(stored(ws)) == 1
    assert left_running(str(tmp / "cache")) == []


def test_torchrun_two_ranks_per_line(aborted_torchrun) -> None:
    """The merged result of a torchrun job (the run above: a rank's abort at exit, as torch's
    gloo threads do in plain torchrun runs too, takes nothing from it)."""
    proc, doc, _, tmp = aborted_torchrun
    assert doc, proc.stderr[-3000:]
    assert doc["world_size"] == 2 and [r["rank"] for r in doc["ranks"]] == [0, 1]
    model = [ln for ln in doc["lines"] if ln["file"] == "tinylm/model.py" and ln["self_time_us"] > 0]
    assert model and all(len(ln["per_rank"]) == 2 for ln in model)
    assert doc["script"]["launcher"] == "torchrun"
    assert left_running(str(tmp / "cache")) == []


def test_inference_script_steps_on_forward(tmp_path: Path) -> None:
    ws = project(tmp_path)
    out = tmp_path / "out.json"
    proc, _ = lens_run(ws, tmp_path, "--no-store", "--json", str(out), "--", "python", "infer.py")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "predicted" in proc.stdout
    assert json.loads(out.read_text())["script"]["detector"] == "forward"
    assert stored(ws) == [] and run_folders(tmp_path) == []  # not stored: its folder goes too


def test_run_folders_go_with_runs_that_are_not_stored_and_stay_with_stored_ones(tmp_path: Path) -> None:
    ws = project(tmp_path)
    out = tmp_path / "out.json"
    argv = ("--steps", "2:2", "--json", str(out), "--", "python", "tinylm/train.py", "--steps", "6")
    # a run not stored leaves no folder: test_step_on_module_function's run (these options)
    # and test_inference_script_steps_on_forward's
    proc, _ = lens_run(ws, tmp_path, "--no-store", *argv, env={"TRAINIUM_LENS_KEEP_RUNS": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    kept = json.loads(out.read_text())["batch_id"]
    assert run_folders(tmp_path) == [kept]  # kept when asked
    proc, _ = lens_run(ws, tmp_path, *argv)
    assert proc.returncode == 0, proc.stderr[-3000:]
    batch = json.loads(out.read_text())["batch_id"]
    assert len(stored(ws)) == 1 and run_folders(tmp_path) == sorted([kept, batch])  # its result names it
    # a run that fails after its harness armed (the quickest: nothing to train)
    proc, _ = lens_run(ws, tmp_path, "--no-store", "--", "python", "nostep.py")
    assert proc.returncode == 1 and "never made a step" in one_line(proc.stderr)
    assert run_folders(tmp_path) == sorted([kept, batch])  # a failed run's folder went; the rest stay


def test_step_on_file_line(tmp_path: Path) -> None:
    ws = project(tmp_path)
    out = tmp_path / "out.json"
    proc, _ = lens_run(
        ws,
        tmp_path,
        "--no-store",
        "--steps",
        "2:2",
        "--step-on",
        "nostep.py:8",
        "--json",
        str(out),
        "--",
        "python",
        "nostep.py",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert doc["script"]["detector"] == "step-on"
    assert any(
        ln["file"] == "nostep.py" and ln["line"] == 8 and ln["self_time_us"] > 0 for ln in doc["lines"]
    )


def test_existing_sitecustomize_still_runs(tmp_path: Path) -> None:
    ws = project(tmp_path)
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import os\nos.environ['USER_SITE_RAN'] = '1'\n")
    (ws / "show_site.py").write_text(
        "import os, torch\nprint('user site', os.environ.get('USER_SITE_RAN'))\n"
    )
    proc, _ = lens_run(
        ws,
        tmp_path,
        "--no-store",
        "--",
        "python",
        "show_site.py",
        env={"PYTHONPATH": f"{ROOT / 'server'}{os.pathsep}{site}"},
    )
    assert "user site 1" in proc.stdout
    assert "never made a step" in proc.stderr  # armed (it said hello), but no steps


def one_line(stderr: str) -> str:
    mine = [ln for ln in stderr.splitlines() if ln.startswith("trainium-lens: ") and "trainium-lens: " in ln]
    assert mine, stderr[-2000:]
    return mine[-1]


@pytest.mark.parametrize(
    ("command", "status", "says"),
    [
        (
            ["python", "tinylm/train.py", "--steps", "4"],
            1,
            "the script ran 4 optimizer steps; --steps 3:5 needs 8",
        ),
        (
            ["python", "tinylm/train.py", "--steps", "14", "--fail-at", "4"],
            1,
            f"tinylm/train.py:{line_of(DATA / 'scripts' / 'tinylm' / 'train.py', 'raise RuntimeError')}: "
            "the script raised RuntimeError: diverged at step 4",
        ),
        (["python", "nostep.py"], 1, "never made a step (tried: optimizer step hooks"),
        (["python", "selfprof.py"], 1, "runs torch.profiler itself"),
        (["python", "-I", "tinylm/train.py"], 2, "python -I (isolated mode ignores PYTHONPATH)"),
        (["python", "-E", "tinylm/train.py"], 2, "python -E"),
        (["bash", "tinylm/train.py"], 2, "bash is not a Python command"),
    ],
)
def test_bad_input_one_line(tmp_path: Path, command: list[str], status: int, says: str) -> None:
    ws = project(tmp_path)
    proc, _ = lens_run(ws, tmp_path, "--", *command)
    assert proc.returncode == status, proc.stderr[-3000:]
    assert says in one_line(proc.stderr)
    assert stored(ws) == [] and run_folders(tmp_path) == []  # a failed run leaves no folder
    assert left_running(str(tmp_path / "cache")) == []


def test_wrapper_dropping_pythonpath_said_within_seconds(tmp_path: Path) -> None:
    ws = project(tmp_path)
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "python").write_text(f'#!/bin/sh\nunset PYTHONPATH\nexec {sys.executable} "$@"\n')
    (shim / "python").chmod(0o755)
    proc, took = lens_run(
        ws,
        tmp_path,
        "--",
        str(shim / "python"),
        "tinylm/train.py",
        "--steps",
        "100000",
        env={"TRAINIUM_LENS_HELLO_S": "3"},
    )
    assert proc.returncode != 0
    assert "the harness never armed" in one_line(proc.stderr)
    assert took < 30
    assert stored(ws) == []
    assert left_running(str(tmp_path / "cache")) == []


def test_step_on_module_function(tmp_path: Path) -> None:
    ws = project(tmp_path)
    out = tmp_path / "out.json"
    proc, _ = lens_run(
        ws,
        tmp_path,
        "--no-store",
        "--steps",
        "2:2",
        "--step-on",
        "model.TinyNet.forward",
        "--json",
        str(out),
        "--",
        "python",
        "tinylm/train.py",
        "--steps",
        "6",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(out.read_text())["script"]["detector"] == "step-on"
    assert stored(ws) == [] and run_folders(tmp_path) == []  # not stored: its folder goes too
    proc, _ = lens_run(
        ws,
        tmp_path,
        "--steps",
        "2:2",
        "--step-on",
        "model.nothing",
        "--",
        "python",
        "tinylm/train.py",
        "--steps",
        "3",
    )
    assert "--step-on model.nothing: no such function" in one_line(proc.stderr)
    assert "step 3 loss" in proc.stdout  # the script ran on, unprofiled


def test_timeout_stops_the_script_and_everything_it_started(tmp_path: Path) -> None:
    ws = project(tmp_path)
    proc, took = lens_run(
        ws, tmp_path, "--timeout", "5", "--", "python", "tinylm/train.py", "--steps", "100000"
    )
    assert proc.returncode == 124
    assert "timed out after 5 s" in one_line(proc.stderr)
    assert took < 60
    assert stored(ws) == [] and run_folders(tmp_path) == []
    assert left_running(str(tmp_path / "cache")) == []

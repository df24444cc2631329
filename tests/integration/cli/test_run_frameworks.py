"""``trainium-lens run`` on the loops training frameworks write (docs/scripts.md,
"Training frameworks"): where a step ends and what it holds.

* a plain loop with an LR scheduler (``tests/data/scripts/scheduled.py``): the
  scheduler replaces ``optimizer.step`` on the instance when it is built, and the
  step must still end where the optimizer's ``step()`` returns, outside torch's
  ``Optimizer.step#…`` range, never inside it;
* a Hugging Face Trainer (``tests/data/scripts/hf/trainer.py``: a tiny random
  Llama, gradient accumulation 2, the Trainer's default scheduler, synthetic
  data): the Trainer's own steps (``on_step_end``), each with its 2
  micro-batches, forward and backward per line of transformers' files
  (``--include transformers``);
* an accelerate loop with ``accelerator.accumulate(model)``
  (``tests/data/scripts/hf/accelerated.py``) under ``accelerate launch`` (2 ranks:
  torchrun's agent in accelerate's own process) and ``python -m
  accelerate.commands.launch --cpu`` (its simple launcher: one child process):
  every rank profiled, a step an update (the loss line runs twice per step);
* the forward and backward a closure runs inside ``optimizer.step(closure)``
  (``tests/data/scripts/closure.py``, and Lightning's automatic optimization:
  ``tests/data/scripts/lit.py``) are the model's lines' forward and backward,
  and the optimizer's time is its own ops' alone;
* Lightning's own steps (``lit.py --accumulate 2``): the lightning detector, each
  step an update with its 2 micro-batches (the first outside ``optimizer.step``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.cli.test_run import lens_run, project


@pytest.fixture(scope="module")
def scheduled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, str]:
    tmp = tmp_path_factory.mktemp("scheduled")
    ws = project(tmp)
    out = tmp / "out.json"
    proc, _ = lens_run(ws, tmp, "--steps", "3:4", "--json", str(out), "--", "python", "scheduled.py")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return ws, json.loads(out.read_text()), proc.stdout


def _x_events(trace: dict, prefix: str) -> list[dict]:
    return sorted(
        (e for e in trace["traceEvents"] if e.get("ph") == "X" and e["name"].startswith(prefix)),
        key=lambda e: e["ts"],
    )


def test_an_lr_schedulers_loop_steps_end_after_the_optimizers_step_returns(scheduled) -> None:
    ws, doc, stdout = scheduled
    assert "step 14 loss" in stdout and "lr 0.000125" in stdout  # the scheduler ran as in a plain run
    assert doc["script"]["detector"] == "optimizer"
    src = (ws / "scheduled.py").read_text().splitlines()
    step_line = src.index("        optimizer.step()") + 1
    (adamw,) = [o for o in doc["optimizers"] if o["name"] == "Optimizer.step#AdamW.step"]
    assert adamw["line"] == step_line
    trace = json.loads(Path(doc["artifacts"]["trace"]).read_text())
    steps = _x_events(trace, "ProfilerStep#")
    ranges = _x_events(trace, "Optimizer.step#AdamW.step")
    assert len(steps) == len(ranges) == 4  # steps 3-6: each measured step and its twin
    for step, opt in zip(steps, ranges, strict=True):  # each step holds its optimizer's whole range
        assert step["ts"] <= opt["ts"] and opt["ts"] + opt["dur"] <= step["ts"] + step["dur"], (step, opt)


@pytest.fixture(scope="module")
def trainer(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, str]:
    tmp = tmp_path_factory.mktemp("trainer")
    ws = project(tmp)
    out = tmp / "out.json"
    proc, _ = lens_run(
        ws, tmp, "--no-store", "--steps", "3:5", "--include", "transformers", "--json", str(out), "--",
        "python", "hf/trainer.py", "--steps", "14",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return ws, json.loads(out.read_text()), proc.stdout


def test_a_trainers_steps_are_its_own_each_with_its_micro_batches(trainer) -> None:
    _, doc, stdout = trainer
    assert "trained 14 steps" in stdout  # the script ran on to its end, unprofiled
    s = doc["script"]
    assert s["detector"] == "trainer"
    assert s["framework_steps"] == [3, 8]  # the Trainer's global_step of the recorded steps 3-8
    assert s["micro_batches"] == 2 and s["skipped_steps"] == 0
    assert "found by the trainer detector (its steps 3-8), 2 micro-batches per step" in stdout
    lines = {(ln["file"], ln["line"]): ln for ln in doc["lines"]}
    # the loss of each micro-batch: twice per step; the optimizer's step once
    (loss,) = [ln for ln in doc["lines"] if "nn.functional.cross_entropy(" in ln["text"]]
    assert loss["file"] == "transformers/loss/loss_utils.py" and loss["hits"] == 2
    (adamw,) = [o for o in doc["optimizers"] if o["name"] == "Optimizer.step#AdamW.step"]
    step_line = lines[(adamw["file"], adamw["line"])]
    assert adamw["file"] == "transformers/trainer.py" and "optimizer.step()" in step_line["text"]
    assert step_line["hits"] == 1 and step_line["self_time_us"] > 0
    llama = [ln for ln in doc["lines"] if ln["file"] == "transformers/models/llama/modeling_llama.py"]
    assert any(ln["self_time_us"] > 0 and ln["backward_self_time_us"] > 0 for ln in llama)
    assert doc["totals"]["forward_time_us"] > 0 and doc["totals"]["backward_time_us"] > 0
    assert s["data_file"] == "accelerate/data_loader.py"  # the loader the Trainer iterates
    assert doc["reconciliation"]["reference_us"] == doc["totals"]["wall_us_median"] > 0


ACCELERATE_DEFAULTS = ("--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no")


def _accelerated_lines(doc: dict, ws: Path) -> dict[str, dict]:
    src = (ws / "hf" / "accelerated.py").read_text().splitlines()
    by_line = {ln["line"]: ln for ln in doc["lines"] if ln["file"] == "hf/accelerated.py"}
    return {
        text: by_line[src.index(text) + 1]
        for text in (
            "            loss = torch.nn.functional.cross_entropy(model(x), y)",
            "            optimizer.step()",
        )
    }


def test_accelerate_launch_profiles_every_rank_and_a_step_is_an_update(tmp_path: Path) -> None:
    ws = project(tmp_path)
    out = tmp_path / "out.json"
    proc, _ = lens_run(
        ws, tmp_path, "--no-store", "--steps", "3:3", "--json", str(out), "--",
        "accelerate", "launch", "--multi_gpu", "--num_processes", "2", *ACCELERATE_DEFAULTS,
        "hf/accelerated.py",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "12 updates on 2 processes" in proc.stdout
    doc = json.loads(out.read_text())
    assert doc["script"]["launcher"] == "accelerate" and doc["script"]["detector"] == "optimizer"
    assert doc["world_size"] == 2 and [r["rank"] for r in doc["ranks"]] == [0, 1]
    lines = _accelerated_lines(doc, ws)
    loss, step = lines.values()
    assert loss["hits"] == 2  # both micro-batches of the update inside its step
    assert doc["script"]["micro_batches"] == 2  # AcceleratedOptimizer.step calls per update
    assert "found by the optimizer detector, 2 micro-batches per step" in proc.stdout
    assert step["self_time_us"] > 0 and loss["backward_self_time_us"] > 0
    assert sorted(p["rank"] for p in loss["per_rank"]) == [0, 1]
    assert doc["script"]["data_file"] == "accelerate/data_loader.py"


def test_python_m_accelerate_launch_on_one_cpu_process(tmp_path: Path) -> None:
    ws = project(tmp_path)
    out = tmp_path / "out.json"
    proc, _ = lens_run(
        ws, tmp_path, "--no-store", "--steps", "3:3", "--json", str(out), "--",
        "python", "-m", "accelerate.commands.launch", "--cpu", "--num_processes", "1", *ACCELERATE_DEFAULTS,
        "hf/accelerated.py",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "12 updates on 1 processes" in proc.stdout
    doc = json.loads(out.read_text())
    assert doc["script"]["launcher"] == "accelerate" and not doc.get("ranks")
    loss, step = _accelerated_lines(doc, ws).values()
    assert loss["hits"] == 2 and step["self_time_us"] > 0
    assert doc["script"]["micro_batches"] == 2


@pytest.fixture(scope="module")
def lightning(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, str]:
    tmp = tmp_path_factory.mktemp("lightning")
    ws = project(tmp)
    out = tmp / "out.json"
    proc, _ = lens_run(
        ws, tmp, "--no-store", "--steps", "3:4", "--json", str(out), "--",
        "python", "lit.py", "--steps", "12", "--accumulate", "2",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return ws, json.loads(out.read_text()), proc.stdout


def test_lightnings_steps_are_its_updates_each_with_its_micro_batches(lightning) -> None:
    ws, doc, stdout = lightning
    assert "trained 12 steps" in stdout  # the script ran on to its end
    s = doc["script"]
    assert s["detector"] == "lightning"
    assert s["framework_steps"] == [3, 6]  # Lightning's global_step of the recorded steps 3-6
    assert s["micro_batches"] == 2 and s["skipped_steps"] == 0
    assert "found by the lightning detector (its steps 3-6), 2 micro-batches per step" in stdout
    src = (ws / "lit.py").read_text().splitlines()
    loss_line = src.index("        return torch.nn.functional.cross_entropy(self.net(x), y)") + 1
    (loss,) = [ln for ln in doc["lines"] if (ln["file"], ln["line"]) == ("lit.py", loss_line)]
    assert loss["hits"] == 2  # both micro-batches' forward inside the step
    assert loss["backward_self_time_us"] > 0
    assert doc["reconciliation"]["reference_us"] == doc["totals"]["wall_us_median"] > 0


def _closure_checks(doc: dict, stdout: str) -> None:
    totals = doc["totals"]
    (adamw,) = [o for o in doc["optimizers"] if o["name"] == "Optimizer.step#AdamW.step"]
    # the optimizer's time is ops on its step's line alone (lit.py: trainer.fit(...), which
    # holds Lightning's own ops too), none of the model's
    step_line = next(ln for ln in doc["lines"] if (ln["file"], ln["line"]) == (adamw["file"], adamw["line"]))
    assert totals["optimizer_time_us"] <= step_line["self_time_us"] + 0.01
    assert adamw["self_time_us"] == pytest.approx(totals["optimizer_time_us"], rel=1e-6, abs=0.01)
    # and the closure's forward and backward are the model's, on its lines
    model = [ln for ln in doc["lines"] if ln["file"] == "tinylm/model.py"]
    assert totals["forward_time_us"] > 0 and totals["backward_time_us"] > 0
    assert sum(ln["self_time_us"] for ln in model) <= totals["forward_time_us"] + 0.01
    assert sum(ln["backward_self_time_us"] for ln in model) <= totals["backward_time_us"] + 0.01
    assert all(ln["backward_self_time_us"] > 0 for ln in model if "self.up(h)" in ln["text"])
    assert "bwd self" in stdout  # the table's backward columns


def test_a_closures_forward_and_backward_are_not_optimizer_time(tmp_path: Path) -> None:
    ws = project(tmp_path)
    out = tmp_path / "out.json"
    proc, _ = lens_run(
        ws, tmp_path, "--no-store", "--steps", "3:3", "--json", str(out), "--", "python", "closure.py"
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert doc["script"]["detector"] == "optimizer"
    _closure_checks(doc, proc.stdout)


def test_lightnings_closure_forward_and_backward_are_not_optimizer_time(lightning) -> None:
    _, doc, stdout = lightning
    _closure_checks(doc, stdout)

"""optimum-neuron's shape: transformers' own ``Trainer`` (``NeuronTrainer`` is a subclass) on
torch-xla's CPU device (``tests/data/scripts/hf/trainer.py --xla``: a tiny random Llama,
gradient accumulation 2). On xla the Trainer's loader is accelerate's ``MpDeviceLoader``
wrapper (a sync at each batch) and its optimizer accelerate's ``AcceleratedOptimizer``: a step
is the Trainer's own update, its micro-batches inside, and torch-xla's execution log agrees.

The xla venv holds torch and torch-xla only (scripts/setup-xla.sh): transformers and what it
needs come from the deps venv's site-packages on ``PYTHONPATH`` (pure Python; only the
packages the xla venv lacks, so its torch stays torch 2.9), nothing installed into either."""

from __future__ import annotations

import json
import os
import sysconfig
from pathlib import Path

import pytest

from tests.conftest import ROOT, XLA_PY, needs_xla
from tests.integration.cli.test_run import lens_run, project
from tests.support.procs import left_running

SKIP = {"torch", "functorch", "torchgen", "triton", "__pycache__"}


def _overlay(tmp: Path) -> Path:
    """A folder of links to the deps venv's packages that the xla venv lacks."""
    transformers = pytest.importorskip("transformers")
    deps = Path(transformers.__file__).parents[1]
    purelib = os.popen(
        f"{XLA_PY} -c 'import sysconfig; print(sysconfig.get_path(\"purelib\"))'"
    ).read().strip() or sysconfig.get_path("purelib")
    overlay = tmp / "hf-site"
    overlay.mkdir()
    for entry in deps.iterdir():
        name = entry.name
        if name in SKIP or name.startswith(("torch-", "nvidia", "triton")) or name.endswith(".pth"):
            continue
        if not (Path(purelib) / name).exists():
            (overlay / name).symlink_to(entry)
    return overlay


@pytest.fixture(scope="module")
def trainer(tmp_path_factory: pytest.TempPathFactory) -> tuple[object, dict, Path]:
    tmp = tmp_path_factory.mktemp("xla-trainer")
    ws = project(tmp)
    out = tmp / "out.json"
    env = {"PYTHONPATH": f"{ROOT / 'server'}{os.pathsep}{_overlay(tmp)}", "PJRT_DEVICE": "CPU"}
    proc, _ = lens_run(
        ws, tmp, "--no-store", "--backend", "xla", "--steps", "3:5", "--include", "transformers",
        "--json", str(out), "--", str(XLA_PY), "hf/trainer.py", "--xla", "--steps", "8",
        env=env, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    doc = json.loads(out.read_text())
    return proc, doc["results"][0] if "results" in doc else doc, tmp


@needs_xla
def test_the_trainers_update_on_xla_is_one_step_with_its_micro_batches(trainer) -> None:
    proc, r, tmp = trainer
    assert "trained 8 steps" in proc.stdout  # the script's own end: the tool broke nothing
    assert r["backend"] == "xla"
    s = r["script"]
    assert s["detector"] == "trainer" and s["framework_steps"] == [3, 5] and s["micro_batches"] == 2
    # two micro-batch graphs and the optimizer's (run at the loader's next batch) per update,
    # and torch-xla's own log repeats exactly that pattern
    assert r["signals"]["graphs_per_step"] == 3
    check = s["xla_log"]
    assert check["source"] == "PT_XLA_DEBUG_LEVEL=2" and check["period"] == 3 and check["agrees"]
    assert check["graphs_per_step"] == [3, 3, 3]
    assert "parallel loader" in check["pattern"][-1]["cause"]
    llama = [ln for ln in r["lines"] if ln["file"] == "transformers/models/llama/modeling_llama.py"]
    assert any(ln["self_time_us"] > 0 and (ln.get("backward_self_time_us") or 0) > 0 for ln in llama)
    assert r["totals"]["optimizer_time_us"] > 0
    assert not left_running(str(tmp / "cache"))

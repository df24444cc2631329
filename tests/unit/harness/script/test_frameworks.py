"""``harness/script/frameworks.py``: the step callback every Trainer's
``CallbackHandler`` gets once the script has imported transformers' callbacks; a
step ends at ``on_step_end``, its micro-batches counted, an update the optimizer
skipped (fp16 inf/NaN: ``AcceleratedOptimizer.step_was_skipped``) still a step;
and from the framework's first step on the optimizer's hooks end no step."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
import torch

from trainium_lens.harness.script.detect import Detector


@pytest.fixture
def detector():
    seen: list[tuple[str, dict | None]] = []
    d = Detector(lambda name: seen.append((name, d.step_info)), None, "/nowhere")
    d.install()
    yield d, seen
    d.remove()


def test_a_trainers_callbacks_end_its_steps_with_their_micro_batches_and_skips(detector):
    d, seen = detector
    from transformers.trainer_callback import CallbackHandler, TrainerControl, TrainerState

    model = torch.nn.Linear(4, 1)
    inner = torch.optim.SGD(model.parameters(), lr=0.1)
    handler = CallbackHandler([], model, None, inner, None)
    assert [type(c).__name__ for c in handler.callbacks][-1] == "TrainiumLensSteps"
    state, control = TrainerState(), TrainerControl()
    args: Any = SimpleNamespace()
    for number, skipped in ((1, False), (2, True), (3, False)):
        handler.on_step_begin(args, state, control)
        handler.on_substep_end(args, state, control)  # the first of 2 micro-batches
        model(torch.randn(2, 4)).sum().backward()
        if not skipped:  # a skipped fp16 update never reaches the optimizer (nor its hooks)
            inner.step()
        state.global_step = number
        handler.optimizer = SimpleNamespace(step_was_skipped=skipped)
        handler.on_step_end(args, state, control)
    assert seen == [
        ("trainer", {"framework_step": 1, "micro_batches": 2, "skipped": False}),
        ("trainer", {"framework_step": 2, "micro_batches": 2, "skipped": True}),
        ("trainer", {"framework_step": 3, "micro_batches": 2, "skipped": False}),
    ]


@pytest.mark.parametrize("package", ["lightning.pytorch", "pytorch_lightning"])
def test_a_lightning_trainers_steps_are_its_updates_with_their_micro_batches(detector, package: str):
    """A real Lightning fit, ``accumulate_grad_batches=2``: each step ends at the
    batch that moved ``global_step``, its 2 micro-batches counted; the optimizer's
    hooks (which fire once per update too) end none of them."""
    d, seen = detector
    import importlib

    pl: Any = importlib.import_module(package)
    from torch.utils.data import DataLoader, TensorDataset

    class Module(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = torch.nn.Linear(4, 1)

        def training_step(self, batch: Any, batch_idx: int) -> Any:
            return self.net(batch[0]).sum()

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(self.parameters(), lr=0.1)

    trainer = pl.Trainer(
        max_steps=3, accumulate_grad_batches=2, accelerator="cpu", devices=1, logger=False,
        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
    )  # fmt: skip
    assert type(trainer.callbacks[-1]).__name__ == "TrainiumLensSteps"
    trainer.fit(Module(), DataLoader(TensorDataset(torch.randn(16, 4)), batch_size=2))
    assert trainer.global_step == 3
    step = {"micro_batches": 2, "skipped": False}
    assert seen == [("lightning", {"framework_step": n, **step}) for n in (1, 2, 3)]


def test_watching_imports_no_framework_and_wraps_lightning_once_the_script_does() -> None:
    """A fresh interpreter: the detector's watch loads none of the frameworks; the
    script's own ``import lightning`` is what wraps its Trainer."""
    import subprocess
    import sys

    from tests.conftest import ROOT

    code = (
        "import sys, torch\n"
        "from trainium_lens.harness.script.detect import Detector\n"
        "Detector(lambda name: None, None, '/').install()\n"
        "names = ('lightning', 'pytorch_lightning', 'transformers', 'accelerate')\n"
        "print(sorted(n for n in names if n in sys.modules))\n"
        "import lightning.pytorch as pl\n"
        "print(getattr(pl.Trainer.__init__, '_trainium_lens', False))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT / "server"), "PATH": "/usr/bin:/bin"},
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split("\n")[:2] == ["[]", "True"]

"""Where a training framework's steps are, told by the framework itself.

* accelerate: ``AcceleratedOptimizer.step``'s calls counted, each a micro-batch
  (the optimizer's hooks, which fire on updates only, end the steps).
* Hugging Face ``Trainer`` (and every trainer built on transformers'
  ``CallbackHandler``): a callback is added to every handler the script's
  Trainers build (``CallbackHandler.__init__`` wrapped once
  ``transformers.trainer_callback`` is loaded: by the script, never by the
  harness). A step begins at ``on_step_begin`` and ends at ``on_step_end``,
  after the optimizer's step, the scheduler's and ``zero_grad``: the Trainer's
  own update step, its ``gradient_accumulation_steps`` micro-batches inside it
  (``on_substep_end`` after each but the last). The optimizer's global hooks
  cannot tell this: the Trainer's ``AcceleratedOptimizer`` never ran
  ``Optimizer.__init__`` (its own ``step`` has no hooks; the inner optimizer's
  fire), and an fp16 step skipped for inf/NaN never reaches them, while
  ``on_step_end`` follows every step, skipped or not (``global_step`` counts it).
* PyTorch Lightning (``lightning.pytorch`` and ``pytorch_lightning``): a
  ``Callback`` is appended to every ``Trainer``'s callbacks once its ``__init__``
  has built them (``Trainer.__init__`` wrapped once the script has loaded the
  trainer's module). Its ``global_step`` counts optimizer updates: a step begins
  at the first ``on_train_batch_start`` after an update and ends at the
  ``on_train_batch_end`` whose batch moved ``global_step``, so with
  ``accumulate_grad_batches`` k the update's k micro-batches are inside it (the
  optimizer's hooks fire once per update and could not count them).

The detector (``detect.Detector``) takes the framework's word from its first
step on: the optimizer's hooks and the forward's then end no step.
"""

from __future__ import annotations

import functools
import sys
from typing import Any

from trainium_lens.harness.script.after_import import AfterImport

TRAINER_CALLBACKS = "transformers.trainer_callback"
ACCELERATED_OPTIMIZER = "accelerate.optimizer"
LIGHTNING_TRAINERS = ("lightning.pytorch.trainer.trainer", "pytorch_lightning.trainer.trainer")
_watching: dict = {"detector": None}  # one per process: the callbacks report to it


def watch_frameworks(detector: Any) -> None:
    """Add the step callback to every Trainer built from now on, and count
    accelerate's optimizer calls (``detector``: the ``detect.Detector``, typed
    ``Any``: it imports this module)."""
    _watching["detector"] = detector
    for name, then in _watched().items():
        loaded = sys.modules.get(name)
        if loaded is not None:
            try:
                then(loaded)
            except Exception:  # a version this does not know: the optimizer's hooks count
                pass
        elif not any(isinstance(f, AfterImport) and f.name == name for f in sys.meta_path):
            sys.meta_path.insert(0, AfterImport(name, then))


def unwatch_frameworks() -> None:
    """The detector is gone: the callbacks already added say nothing more."""
    _watching["detector"] = None
    watched = _watched()
    sys.meta_path[:] = [f for f in sys.meta_path if not (isinstance(f, AfterImport) and f.name in watched)]


def _watched() -> dict:
    """The framework modules watched, each with what to do once it is loaded."""
    out = {TRAINER_CALLBACKS: _add_callback, ACCELERATED_OPTIMIZER: _count_calls}
    out.update(dict.fromkeys(LIGHTNING_TRAINERS, _add_lightning_callback))
    return out


def _count_calls(module: Any) -> None:
    """``AcceleratedOptimizer.step``: each call a micro-batch (``with
    accelerator.accumulate(model):`` calls it on every one, and it steps the inner
    optimizer only when the gradients sync, the update that ends the step)."""
    cls = getattr(module, "AcceleratedOptimizer", None)
    original = getattr(cls, "step", None)
    if original is None or getattr(original, "_trainium_lens", False):
        return

    @functools.wraps(original)
    def step(self: Any, *args: Any, **kwargs: Any) -> Any:
        detector = _watching["detector"]
        if detector is not None:
            detector.accelerated_step_called()
        return original(self, *args, **kwargs)

    step._trainium_lens = True  # type: ignore[attr-defined]
    cls.step = step  # type: ignore[union-attr]


def _add_callback(module: Any) -> None:
    try:
        _wrap_handler(module)
    except Exception as exc:  # a transformers this does not know: the optimizer's hooks count
        detector = _watching["detector"]
        if detector is not None:
            detector.warn(
                f"the Trainer's steps are counted by the optimizer's hooks ({type(exc).__name__}: {exc})"
            )


def _wrap_handler(module: Any) -> None:
    handler = module.CallbackHandler
    if getattr(handler.__init__, "_trainium_lens", False):
        return

    class TrainiumLensSteps(module.TrainerCallback):  # the name the Trainer's callback list shows
        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            detector = _watching["detector"]
            if detector is not None:
                detector.framework_step_begins("trainer")

        def on_substep_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            detector = _watching["detector"]
            if detector is not None:
                detector.micro_batch_ends()

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            detector = _watching["detector"]
            if detector is None:
                return
            # accelerate's AcceleratedOptimizer: True when GradScaler skipped the update (inf/NaN)
            skipped = bool(getattr(kwargs.get("optimizer"), "step_was_skipped", False))
            detector.framework_step_ends("trainer", getattr(state, "global_step", None), skipped)

    original = handler.__init__

    @functools.wraps(original)
    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        self.callbacks.append(TrainiumLensSteps())

    init._trainium_lens = True  # type: ignore[attr-defined]
    handler.__init__ = init


def _add_lightning_callback(module: Any) -> None:
    try:
        _wrap_lightning(module)
    except Exception as exc:  # a Lightning this does not know: the optimizer's hooks count
        detector = _watching["detector"]
        if detector is not None:
            detector.warn(
                f"Lightning's steps are counted by the optimizer's hooks ({type(exc).__name__}: {exc})"
            )


def _wrap_lightning(module: Any) -> None:
    trainer = module.Trainer
    if getattr(trainer.__init__, "_trainium_lens", False):
        return

    class TrainiumLensSteps(module.Callback):  # the name the Trainer's callback list shows
        def __init__(self) -> None:
            self.updates: int | None = None  # global_step at the last step's end
            self.in_step = False

        def on_train_batch_start(self, trainer: Any, module: Any, batch: Any, idx: int) -> None:
            detector = _watching["detector"]
            if detector is None:
                return
            if self.updates is None:
                self.updates = trainer.global_step
            if not self.in_step:
                self.in_step = True
                detector.framework_step_begins("lightning")
            else:
                detector.micro_batch_ends()  # the next micro-batch of the same update

        def on_train_batch_end(self, trainer: Any, module: Any, outputs: Any, batch: Any, idx: int) -> None:
            detector = _watching["detector"]
            if detector is None or not self.in_step or trainer.global_step == self.updates:
                return  # a micro-batch that did not update: the step goes on
            self.updates = trainer.global_step
            self.in_step = False
            detector.framework_step_ends("lightning", self.updates, False)

    original = trainer.__init__

    @functools.wraps(original)
    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        self.callbacks.append(TrainiumLensSteps())

    init._trainium_lens = True  # type: ignore[attr-defined]
    trainer.__init__ = init

"""What counts as one training step of an unmodified script, and where it ends.

* ``optimizer``: the optimizers' global step hooks (``register_optimizer_step_
  pre_hook``/``post_hook``: every ``Optimizer`` subclass's ``step`` calls them).
  One optimizer counts, the first that steps: several per step do not multiply
  the steps. The hooks run *inside* torch's ``Optimizer.step#…`` profiler range,
  and a step boundary there would cut that range in two, so from its first step
  on that optimizer's ``step`` gets an outer wrapper, on the instance (an LR
  scheduler's own wrapper is there), whose end is the boundary (the first step's
  own boundary comes from the post-hook: it is never profiled). A closure passed
  to that ``step`` (Lightning's forward and backward run in it) is called in a
  range of its own, so its ops are not counted as optimizer time.
* ``forward``: with no optimizer, the outermost ``nn.Module`` forward whose
  output needs no grad (an inference or evaluation loop; a training forward is
  left to the optimizer that will follow it).
* a framework's own steps (``frameworks.py``: the Hugging Face Trainer's
  callbacks), from its first step on: the optimizer's hooks and the forward's
  then end no step; ``step_info`` holds what the framework said of the step
  (its own step number, its micro-batches, whether the update was skipped).
* ``step-on``: ``--step-on module.function`` (each call one step, its return
  the boundary) or ``--step-on FILE:LINE`` (each execution of the line one step,
  found with ``sys.settrace`` on that file's frames only).
"""

from __future__ import annotations

import functools
import os
import sys
import threading
import types
from collections.abc import Callable, Mapping
from typing import Any

import torch

from trainium_lens.harness.attribution.kinds import CLOSURE_RANGE
from trainium_lens.harness.script.frameworks import unwatch_frameworks, watch_frameworks

_NONE = object()  # the optimizer had no ``step`` of its own (the class's ran)


class Detector:
    def __init__(
        self,
        boundary: Callable[[str], None],
        step_on: str | None,
        root: str,
        warn: Callable[[str], None] | None = None,
    ):
        self.boundary = boundary  # called with the detector's name after each step
        self.step_on = step_on
        self.root = root
        self.counted: Any = None  # the optimizer whose steps count
        self.training_forward = False
        self.handles: list[Any] = []
        self.forward_handles: list[Any] = []
        self._inner = threading.local()
        self._depth = 0
        self.tried: list[str] = []
        self.warn = warn or (lambda _message: None)
        self.framework: str | None = None  # set at a framework's first step: its steps count
        self.step_info: dict | None = None  # the framework's word on the step that just ended
        self.output_device: str | None = None  # the last outermost forward's (on_xla.py)
        self._micro = 0
        self._calls = 0  # AcceleratedOptimizer.step calls since the last update (frameworks.py)
        self.active = True  # False once removed: the wrapper left on an optimizer passes calls through
        self._unwrapped: tuple[Any, Any] | None = None  # (optimizer, its own ``step`` before _wrap)

    def install(self) -> None:
        if self.step_on:
            self._install_step_on(self.step_on)
            return
        from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

        self.handles.append(register_optimizer_step_pre_hook(self._pre))
        self.handles.append(register_optimizer_step_post_hook(self._post))
        mod = torch.nn.modules.module
        self.forward_handles = [
            mod.register_module_forward_pre_hook(self._fwd_pre),
            mod.register_module_forward_hook(self._fwd_post, always_call=True),
        ]
        self.tried = ["optimizer step hooks", "outermost module forward (no grad)"]
        watch_frameworks(self)

    def _drop_forward_hooks(self) -> None:
        """Global module hooks put every module call on torch's slow path (``_call_impl``
        runs them for each): gone once an optimizer counts, so the unprofiled steps the
        reference times run the model as the user's run does."""
        for h in self.forward_handles:
            h.remove()
        self.forward_handles.clear()

    def remove(self) -> None:
        self.active = False
        unwatch_frameworks()
        for h in self.handles:
            h.remove()
        self.handles.clear()
        self._drop_forward_hooks()
        if self.step_on and ":" in self.step_on and not self._is_module_function(self.step_on):
            sys.settrace(None)

    # -- optimizer ------------------------------------------------------------
    def _pre(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if self.counted is None:
            self.counted = optimizer
            self._wrap(optimizer)
            self._drop_forward_hooks()

    def _post(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if self.framework is None and optimizer is self.counted and not getattr(self._inner, "depth", 0):
            self._optimizer_boundary()  # this call did not come through the wrapper

    def _wrap(self, optimizer: Any) -> None:
        """The counted optimizer's ``step``, wrapped on the instance around whatever
        ``optimizer.step`` is now: the class's method, or an LR scheduler's wrapper
        (torch's ``torch/optim/lr_scheduler.py``, ``patch_track_step_called``, sets one on the instance
        when the scheduler is built, calling the class's step as it was then, so a
        wrapper put on the class later would never run). A bound method, so a
        scheduler built later wraps it in turn (it takes ``opt.step.__func__``)."""
        current = optimizer.step
        if getattr(current, "_trainium_lens", False):
            return
        detector = self

        @functools.wraps(getattr(current, "__func__", current))
        def step(opt: Any, *args: Any, **kwargs: Any) -> Any:
            depth = getattr(detector._inner, "depth", 0)
            detector._inner.depth = depth + 1
            if not detector.active:
                pass  # no range of the harness's in a trace of the script's own
            elif args and callable(args[0]):
                args = (_in_closure_range(args[0]), *args[1:])
            elif callable(kwargs.get("closure")):
                kwargs["closure"] = _in_closure_range(kwargs["closure"])
            try:
                out = current(*args, **kwargs)
            finally:
                detector._inner.depth = depth
            if depth == 0 and opt is detector.counted and detector.framework is None:
                detector._optimizer_boundary()  # after torch's Optimizer.step#… range closed
            return out

        step._trainium_lens = True  # type: ignore[attr-defined]
        self._unwrapped = (optimizer, optimizer.__dict__.get("step", _NONE))
        optimizer.step = types.MethodType(step, optimizer)

    def unwrap(self) -> None:
        """The counted optimizer's ``step`` as it was before ``_wrap``, where ours is
        still the one on the instance (a scheduler built since wraps ours: left as it
        is, its boundary then a no-op). A notebook kernel keeps the optimizer after the
        cell (``in_cell.py``); a script's process ends with it."""
        held, self._unwrapped = self._unwrapped, None
        if held is None:
            return
        optimizer, before = held
        if not getattr(optimizer.__dict__.get("step"), "_trainium_lens", False):
            return
        if before is _NONE:
            del optimizer.step
        else:
            optimizer.step = before

    def _optimizer_boundary(self) -> None:
        # accelerate's AcceleratedOptimizer.step, called on every micro-batch, steps the
        # inner optimizer only when the gradients sync: the calls since the last update
        self.step_info = {"micro_batches": self._calls} if self._calls else None
        self._calls = 0
        self.boundary("optimizer")

    def accelerated_step_called(self) -> None:
        self._calls += 1

    # -- a framework's own steps (frameworks.py) ----------------------------------
    def framework_step_begins(self, name: str) -> None:
        if self.framework is None:
            self.framework = name
            self._drop_forward_hooks()
        self._micro = 1

    def micro_batch_ends(self) -> None:
        self._micro += 1

    def framework_step_ends(self, name: str, number: int | None, skipped: bool) -> None:
        if self.framework != name:
            return
        self.step_info = {"framework_step": number, "micro_batches": self._micro, "skipped": skipped}
        self._calls = 0
        self.boundary(name)

    # -- outermost forward ----------------------------------------------------
    def _fwd_pre(self, module: Any, args: Any) -> None:
        self._depth += 1

    def _fwd_post(self, module: Any, args: Any, output: Any) -> None:
        self._depth = max(0, self._depth - 1)
        if self._depth or self.counted is not None or self.framework is not None:
            return
        out = output[0] if isinstance(output, (tuple, list)) and output else output
        if isinstance(out, Mapping):  # a Hugging Face ModelOutput: its loss or logits
            out = next((v for v in out.values() if isinstance(v, torch.Tensor)), None)
        if isinstance(out, torch.Tensor):
            self.output_device = out.device.type
        if getattr(out, "requires_grad", False):
            self.training_forward = True
            return
        if not self.training_forward:
            self.boundary("forward")

    # -- --step-on ------------------------------------------------------------
    @staticmethod
    def _is_module_function(target: str) -> bool:
        head, _, tail = target.rpartition(":")
        return not (head and tail.isdigit())

    def _install_step_on(self, target: str) -> None:
        if not self._is_module_function(target):
            path, _, line = target.rpartition(":")
            self._trace_line(os.path.realpath(os.path.join(self.root, path)), int(line))
            self.tried = [f"--step-on {target} (each execution of the line)"]
            return
        self.tried = [f"--step-on {target} (each call)"]
        owner, attr = _resolve(target)
        fn = getattr(owner, attr)
        detector = self

        @functools.wraps(fn)
        def counted(*args: Any, **kwargs: Any) -> Any:
            out = fn(*args, **kwargs)
            detector.boundary("step-on")
            return out

        setattr(owner, attr, counted)

    def _trace_line(self, path: str, line: int) -> None:
        detector = self

        def local(frame: Any, event: str, arg: Any) -> Any:
            if event == "line" and frame.f_lineno == line:
                detector.boundary("step-on")
            return local

        def global_trace(frame: Any, event: str, arg: Any) -> Any:
            if event == "call" and os.path.realpath(frame.f_code.co_filename) == path:
                return local
            return None

        # the caller's frames (the script's loop, already running) trace too
        frame: Any = sys._getframe(1)
        while frame is not None:
            if os.path.realpath(frame.f_code.co_filename) == path:
                frame.f_trace = local
            frame = frame.f_back
        sys.settrace(global_trace)


def _in_closure_range(closure: Callable[[], Any]) -> Callable[[], Any]:
    """The closure ``optimizer.step(closure)`` calls (Lightning's forward and
    backward: inside torch's ``Optimizer.step#…`` range) in a range of its own, so
    its ops are the model's, not optimizer time (``attribution/kinds.py``)."""

    @functools.wraps(closure)
    def ranged(*args: Any, **kwargs: Any) -> Any:
        with torch.profiler.record_function(CLOSURE_RANGE):
            return closure(*args, **kwargs)

    return ranged


def _resolve(target: str) -> tuple[Any, str]:
    """``module[.Class].function`` → (its owner, the attribute), importing the
    longest prefix that is a module (as the script's own imports would find it)."""
    import importlib

    parts = target.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            owner: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:-1]:
            owner = getattr(owner, name, None)
        if owner is not None and callable(getattr(owner, parts[-1], None)):
            return owner, parts[-1]
        break
    raise ValueError(f"--step-on {target}: no such function (name it as module.function or FILE:LINE)")

"""What counts as one training step of an unmodified script, and where it ends.

* ``optimizer``: the optimizers' global step hooks (``register_optimizer_step_
  pre_hook``/``post_hook``: every ``Optimizer`` subclass's ``step`` calls them).
  One optimizer counts, the first that steps: several per step do not multiply
  the steps. The hooks run *inside* torch's ``Optimizer.step#…`` profiler range,
  and a step boundary there would cut that range in two, so from its first step
  on the optimizer's class gets an outer wrapper whose end is the boundary (the
  first step's own boundary comes from the post-hook: it is never profiled).
* ``forward``: with no optimizer, the outermost ``nn.Module`` forward whose
  output needs no grad (an inference or evaluation loop; a training forward is
  left to the optimizer that will follow it).
* ``step-on``: ``--step-on module.function`` (each call one step, its return
  the boundary) or ``--step-on FILE:LINE`` (each execution of the line one step,
  found with ``sys.settrace`` on that file's frames only).
"""

from __future__ import annotations

import functools
import os
import sys
import threading
from collections.abc import Callable
from typing import Any

import torch


class Detector:
    def __init__(self, boundary: Callable[[str], None], step_on: str | None, root: str):
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

    def _drop_forward_hooks(self) -> None:
        """Global module hooks put every module call on torch's slow path (``_call_impl``
        runs them for each): gone once an optimizer counts, so the unprofiled steps the
        reference times run the model as the user's run does."""
        for h in self.forward_handles:
            h.remove()
        self.forward_handles.clear()

    def remove(self) -> None:
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
            self._wrap(type(optimizer))
            self._drop_forward_hooks()

    def _post(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if optimizer is self.counted and not getattr(self._inner, "on", False):
            self.boundary("optimizer")  # this call did not come through the wrapper

    def _wrap(self, cls: type) -> None:
        original = cls.__dict__.get("step")
        if original is None or getattr(original, "_trainium_lens", False):
            return
        detector = self

        @functools.wraps(original)
        def step(opt: Any, *args: Any, **kwargs: Any) -> Any:
            if opt is not detector.counted:
                return original(opt, *args, **kwargs)
            detector._inner.on = True
            try:
                out = original(opt, *args, **kwargs)
            finally:
                detector._inner.on = False
            detector.boundary("optimizer")
            return out

        step._trainium_lens = True  # type: ignore[attr-defined]
        step.hooked = True  # type: ignore[attr-defined]  # torch must not wrap it again
        setattr(cls, "step", step)  # noqa: B010  (the class's own step, replaced)

    # -- outermost forward ----------------------------------------------------
    def _fwd_pre(self, module: Any, args: Any) -> None:
        self._depth += 1

    def _fwd_post(self, module: Any, args: Any, output: Any) -> None:
        self._depth = max(0, self._depth - 1)
        if self._depth or self.counted is not None:
            return
        out = output[0] if isinstance(output, (tuple, list)) and output else output
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

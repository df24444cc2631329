"""Label each torch call with the user lines on its Python stack.

A ``TorchFunctionMode`` sees every torch-level call together with the caller's
frames. For each call made (directly or through library code) from user code
it opens one profiler range per user frame, named ``<relpath>(<LINE>): <func>``
(the form Neuron Explorer links to source): the innermost range is the line
that dispatched the op (its *self* time), the outer ones are the lines that
called into user helpers (their *total* time).

A call into a ``torch.compile``d function is a plain Python call the mode never
sees; a profile hook on dynamo's ``compile_wrapper`` code labels the calling
line instead and lifts the mode off the mode stack for the duration, because
dynamo guards on that stack: with the mode on it, every compiled function would
recompile (and trace the mode). The hook's own code is marked for dynamo to skip.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import CodeType, FrameType
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from trainium_lens.harness.eager.hits import HitCounter
from trainium_lens.harness.eager.origin import Origins
from trainium_lens.harness.job.loader import UserCode
from trainium_lens.harness.labels import format_label

# the cheap C++ range (what FX graphs use); the public one on torch builds without it
_RecordFunction = getattr(torch._C._profiler, "_RecordFunctionFast", None) or torch.profiler.record_function

# Torch calls that only read metadata: labelling them would add empty ranges.
# (Not ``__bool__``/``item``: those dispatch ops and synchronize.)
_SKIP = frozenset(
    {
        "size",
        "dim",
        "numel",
        "stride",
        "is_contiguous",
        "data_ptr",
        "element_size",
        "__len__",
        "__repr__",
        "__format__",
        "__hash__",
        "ndimension",
        "nelement",
    }
)
# Properties read through ``__get__`` that dispatch nothing (``.T``, ``.mT`` do).
_SKIP_PROPERTIES = frozenset(
    {
        "shape",
        "dtype",
        "device",
        "requires_grad",
        "is_cuda",
        "ndim",
        "grad_fn",
        "layout",
        "is_leaf",
        "names",
        "grad",
        "is_sparse",
        "is_quantized",
        "is_meta",
        "itemsize",
        "nbytes",
    }
)


class LineLabeler:
    def __init__(self, user: UserCode, stop_code: CodeType, device_backend: bool = False):
        self.user = user
        self.stop_code = stop_code  # the harness frame that called the profiled function
        self.device_backend = device_backend
        self.labels: dict[str, tuple[str, int, str]] = {}  # name -> (file, line, function)
        self._code_info: dict[CodeType, tuple[str, str] | None] = {}
        self._names: dict[tuple[CodeType, int], str] = {}
        self.h2d: dict[str, int] = {}  # innermost label name -> calls that copied host→device
        self.hits = HitCounter()  # label name -> executions of the line (hits.py)
        self.origins = Origins()  # label name -> torch calls, and those through library code
        self.mode = _LineMode(self)
        self._recompute: Callable[[], None] | None = None
        self.hook = _CompiledCallHook(self)

    # -- naming -------------------------------------------------------------
    def label(self, file: str, line: int, function: str) -> str:
        name = format_label(file, line, function)
        self.labels[name] = (file, line, function)
        return name

    def _info(self, code: CodeType) -> tuple[str, str] | None:
        rel = self.user.code_rel(code)
        info = (rel, getattr(code, "co_qualname", code.co_name)) if rel is not None else None
        self._code_info[code] = info
        return info

    def chain(self, frame: FrameType | None, child: FrameType | None = None) -> list[str]:
        """Label names of the user frames from ``frame`` outwards, outermost first
        (``child``: the frame ``frame`` called, if any; for the hit count)."""
        names: list[str] = []
        note = self.hits.note
        stop = self.stop_code
        code_info = self._code_info
        known = self._names
        via = ""  # library code between torch and the innermost user line (origin.py)
        while frame is not None:
            code = frame.f_code
            if code is stop:
                break
            try:
                info = code_info[code]
            except KeyError:
                info = self._info(code)
            if info is not None:
                key = (code, frame.f_lineno)
                name = known.get(key)
                if name is None:
                    name = known[key] = self.label(info[0], key[1], info[1])
                if not names:
                    self.origins.note(name, via)
                names.append(name)
                note(name, frame, child)
            elif not names:
                via = self.origins.module_of(frame) or via
            child = frame
            frame = frame.f_back
        names.reverse()
        return names

    # -- switching on and off (around each profiled call only) ---------------
    def __enter__(self) -> LineLabeler:
        self.mode.__enter__()
        self.hook.start()
        self._recompute = _label_recomputation(self.mode)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._recompute is not None:
            self._recompute()
        self.hook.stop()
        self.mode.__exit__(*exc)
        self.hits.end_call()


class _LineMode(TorchFunctionMode):
    def __init__(self, labeler: LineLabeler):
        super().__init__()
        self.labeler = labeler

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if kwargs is None:
            kwargs = {}
        fname = getattr(func, "__name__", "")
        if fname in _SKIP or (
            fname == "__get__"
            and getattr(getattr(func, "__self__", None), "__name__", "") in _SKIP_PROPERTIES
        ):
            return func(*args, **kwargs)
        names = self.labeler.chain(sys._getframe(1))
        if not names:
            return func(*args, **kwargs)
        ranges = [_RecordFunction(n) for n in names]
        for r in ranges:
            r.__enter__()
        try:
            result = func(*args, **kwargs)
        finally:
            for r in reversed(ranges):
                r.__exit__(None, None, None)
        if self.labeler.device_backend:
            _note_h2d(self.labeler, names[-1], args, kwargs, result)
        return result


def _label_recomputation(mode: _LineMode) -> Callable[[], None] | None:
    """Label ``torch.utils.checkpoint``'s recomputation. It runs inside
    ``backward()``, i.e. inside the mode's own handler for that call, where a
    mode is off; the mode is pushed again around the recompute function (user
    code the engine calls back). Returns the undo, or None where this torch
    has no such hook point (recompute ops then still count as recompute, on the
    line of the backward node that needed them)."""
    cp = sys.modules.get("torch.utils.checkpoint")
    run = getattr(cp, "_run_fn_with_dynamo_disabled", None) if cp is not None else None
    if run is None or getattr(run, "_trainium_lens", False):
        return None

    def labelled(fn: Any, *args: Any, **kwargs: Any) -> Any:
        with mode:
            return run(fn, *args, **kwargs)

    labelled._trainium_lens = True  # type: ignore[attr-defined]
    cp._run_fn_with_dynamo_disabled = labelled  # type: ignore[union-attr]

    def undo() -> None:
        cp._run_fn_with_dynamo_disabled = run  # type: ignore[union-attr]

    return undo


def _note_h2d(labeler: LineLabeler, name: str, args: tuple, kwargs: dict, result: Any) -> None:
    """A call that read a CPU tensor and produced a device tensor copied host→device
    (e.g. a CPU scalar tensor promoted into a device op, or ``.to(device)``)."""
    if not isinstance(result, torch.Tensor) or result.device.type == "cpu":
        return
    for value in list(args) + list(kwargs.values()):
        if isinstance(value, torch.Tensor) and value.device.type == "cpu":
            labeler.h2d[name] = labeler.h2d.get(name, 0) + 1
            return


def _compile_wrapper_code() -> CodeType | None:
    """The code object dynamo wraps every compiled callable in (``compile_wrapper``),
    whatever the backend: the ``eager`` one's, which does not import inductor (about
    1 s of CPU on a run whose user code only imported dynamo)."""
    if "torch._dynamo" not in sys.modules:
        return None
    try:
        wrapper = torch.compile(lambda: None, backend="eager")
        return getattr(wrapper, "__code__", None)
    except Exception:
        return None


class _CompiledCallHook:
    """``sys.setprofile`` hook: label the user line that calls a compiled function."""

    def __init__(self, labeler: LineLabeler):
        self.labeler = labeler
        self.code: CodeType | None = None
        self._open: list[tuple[FrameType, list, Any]] = []
        self._prev: Callable | None = None
        self.enabled = False
        self._seen = False

    def refresh(self) -> None:
        """Look for dynamo (once the user code imported it)."""
        if self.code is None:
            self.code = _compile_wrapper_code()
            if self.code is not None:
                from torch._dynamo.eval_frame import skip_code

                # dynamo must never trace the hooks
                skip_code(self._profile.__code__)
                skip_code(self._detect.__code__)

    def arm_if_called(self, call: Callable[[], Any]) -> Any:
        """Run ``call`` once watching for compiled calls; arm the hook only if one
        happens: a profile hook costs ~1 µs per Python call, which code that
        never enters a compiled function should not pay."""
        self._seen = False
        self.enabled = False
        if self.code is None:
            return call()
        prev = sys.getprofile()
        sys.setprofile(self._detect)
        try:
            return call()
        finally:
            sys.setprofile(prev)
            self.enabled = self._seen

    def _detect(self, frame: FrameType, event: str, arg: Any) -> None:
        if frame.f_code is self.code:
            self._seen = True

    def start(self) -> None:
        if self.enabled:
            self._prev = sys.getprofile()
            sys.setprofile(self._profile)

    def stop(self) -> None:
        if self.enabled:
            sys.setprofile(self._prev)
            while self._open:  # an exception unwound past a return event
                self._close()

    def _profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if frame.f_code is not self.code:
            return
        if event == "call":
            names = self.labeler.chain(frame.f_back, frame)
            popped = None
            depth = torch._C._len_torch_function_stack()
            if depth and torch._C._get_function_stack_at(depth - 1) is self.labeler.mode:
                popped = torch._C._pop_torch_function_stack()
            ranges = [_RecordFunction(n) for n in names]
            for r in ranges:
                r.__enter__()
            self._open.append((frame, ranges, popped))
        elif event == "return" and self._open and self._open[-1][0] is frame:
            self._close()

    def _close(self) -> None:
        _frame, ranges, popped = self._open.pop()
        for r in reversed(ranges):
            r.__exit__(None, None, None)
        if popped is not None:
            torch._C._push_on_torch_function_stack(popped)

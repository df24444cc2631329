"""Starting ``torch.profiler`` without importing inductor in a run that compiles nothing.

``torch.profiler.profile`` asks ``hasattr(torch, "_inductor")`` when it starts, to
read inductor's ``triton.cudagraphs`` flag (``_KinetoProfile.prepare_trace``, torch
2.9 to 2.13 at least). ``torch._inductor`` is one of torch's lazy modules, so the
question itself imports inductor and, through it, dynamo: ~2.5 s of CPU on this
project's 2-core machines, in every harness run of code that never calls
``torch.compile`` — a third of a small eager profile's cost (py-spy, measured in
docs/harness.md, "Start-up").

While inductor is not imported nothing can have turned its CUDA graphs on, so the
flag's default (off) is the true answer. Here ``prepare_trace`` runs with the lazy
attribute hidden (``hasattr`` answers False, nothing is imported) when inductor is
not yet in ``sys.modules``; once it is (user code compiled something), the method
runs as torch wrote it. Only that call, in its own thread, is affected: any other
thread, and this one before and after it, resolve ``torch._inductor`` as usual.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

_MARK = "_trainium_lens_lazy_inductor"


def keep_inductor_lazy(torch: Any) -> None:
    """Install the guard once per process (idempotent; a torch without the method,
    or without a lazy ``__getattr__``, is left alone)."""
    try:
        cls = torch.profiler.profiler._KinetoProfile
        original = cls.prepare_trace
    except AttributeError:
        return
    if getattr(original, _MARK, False) or not callable(torch.__dict__.get("__getattr__")):
        return

    def prepare_trace(self: Any) -> Any:
        if "torch._inductor" in sys.modules:
            return original(self)
        lazy = torch.__dict__["__getattr__"]
        caller = threading.get_ident()

        def hide_inductor(name: str) -> Any:
            if name == "_inductor" and threading.get_ident() == caller:
                raise AttributeError(name)
            return lazy(name)

        torch.__getattr__ = hide_inductor
        try:
            return original(self)
        finally:
            torch.__getattr__ = lazy

    setattr(prepare_trace, _MARK, True)
    cls.prepare_trace = prepare_trace

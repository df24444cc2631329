"""The work step: one extra labelled call of the profiled function, after the
timed steps, with the profiler recording input shapes (``record_shapes``) and
allocator events (``profile_memory``) and every tensor autograd saves for
backward seen through ``saved_tensors_hooks``.

Why a step of its own: recording shapes and allocations costs time per op
(bench/work_bench.py measures it), so the timed steps never record them and
their figures stay as they were. The work figures do not depend on time, so
one call is enough; they are per call, as every figure of a result.

Saved tensors: the pack hook sees each tensor when an op saves it (inside
that op's profiler range); the first time a storage is saved it opens an empty
range named ``SAVED_PREFIX + index``, so the profile places the save under
the op — hence on its line — and in time against the allocator's events
(``memory.py`` tells an activation from a parameter by that). A storage is
counted once, for the line that saved it first. ``torch.utils.checkpoint``
saves only its inputs: the tensors its own hooks hold are not kept alive
across the forward, and are not seen here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from trainium_lens.harness.runtime.lazy_inductor import keep_inductor_lazy

SAVED_PREFIX = "trainium-lens saved tensor #"
_RecordFunction = getattr(torch._C._profiler, "_RecordFunctionFast", None) or torch.profiler.record_function


@dataclass
class Saved:
    """One storage autograd kept for backward (in save order)."""

    device: str
    ptr: int
    nbytes: int


@dataclass
class SavedTensors:
    records: list[Saved] = field(default_factory=list)
    seen: set = field(default_factory=set)

    def pack(self, tensor: Any) -> Any:
        try:
            storage = tensor.untyped_storage()
            ptr, nbytes = storage.data_ptr(), storage.nbytes()
            device = str(tensor.device)
        except Exception:  # sparse, nested, tensor subclasses without one storage
            return tensor
        key = (device, ptr)
        if nbytes and key not in self.seen:
            self.seen.add(key)
            with _RecordFunction(f"{SAVED_PREFIX}{len(self.records)}"):
                pass
            self.records.append(Saved(device, ptr, nbytes))
        return tensor

    @staticmethod
    def unpack(tensor: Any) -> Any:
        return tensor


@dataclass
class WorkProfile:
    """What the work step left behind."""

    prof: Any
    saved: list[Saved]
    hooks: bool  # saved tensors were watched (False: the call failed with the hooks on)
    cuda_before: int | None = None  # torch.cuda.memory_allocated() when the call began
    cuda_peak: int | None = None  # torch.cuda.max_memory_allocated() over the call


class WorkRecorder:
    """The work profiler, open from ``start()`` to ``stop()``: one call of a marked
    function (``work_step``), or a script's step from one boundary to the next
    (``script/work.py``). The profiler and the saved-tensor hooks are per-thread
    stacks that the code in between leaves balanced."""

    def __init__(self, backend: Any, hooks: bool = True):
        self.backend, self.hooks = backend, hooks
        self.saved = SavedTensors()
        self.before: int | None = None
        self._open: list[Any] = []  # what start() opened, closed in reverse

    def start(self) -> None:
        if self.backend.name == "cuda":
            self.backend.sync()
            torch.cuda.reset_peak_memory_stats()
            self.before = torch.cuda.memory_allocated()
        # Not ``profile_all_threads`` (eager/run.py): with it torch records no allocator
        # events. The autograd engine's device threads inherit the profiler's state anyway.
        # A schedule: the profiler opens a ProfilerStep range, by which the attribution
        # finds the step, as it finds the timed steps.
        keep_inductor_lazy(torch)
        self.prof = torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU],
            record_shapes=True,
            profile_memory=True,
            schedule=lambda _step: torch.profiler.ProfilerAction.RECORD,
        )
        self.prof.start()
        self._open.append(self.prof.stop)
        if self.hooks:
            watch = torch.autograd.graph.saved_tensors_hooks(self.saved.pack, self.saved.unpack)
            watch.__enter__()
            self._open.append(lambda: watch.__exit__(None, None, None))

    def _close(self) -> None:
        """Close what ``start`` opened, the last first; the first error is raised after."""
        error: Exception | None = None
        while self._open:
            try:
                self._open.pop()()
            except Exception as exc:
                error = error or exc
        if error is not None:
            raise error

    def stop(self) -> WorkProfile:
        self.backend.sync()
        peak = torch.cuda.max_memory_allocated() if self.backend.name == "cuda" else None
        self._close()
        return WorkProfile(self.prof, self.saved.records, self.hooks, self.before, peak)

    def abandon(self) -> None:
        try:
            self._close()
        except Exception:
            pass


def _profile(call: Any, backend: Any, hooks: bool) -> WorkProfile:
    recorder = WorkRecorder(backend, hooks)
    recorder.start()
    try:
        out = call(labelled=True)
    except BaseException:
        recorder.abandon()
        raise
    wp = recorder.stop()
    del out
    return wp


def work_step(call: Any, backend: Any) -> WorkProfile:
    """Run the call once under the work profiler. With the saved-tensor hooks on
    first; if the call fails with them on, once more without (no saved bytes then)."""
    try:
        return _profile(call, backend, hooks=True)
    except Exception:
        return _profile(call, backend, hooks=False)

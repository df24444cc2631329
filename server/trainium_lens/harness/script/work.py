"""The work step of an unmodified script: FLOPs, bytes and memory per line.

A marked function gets one extra call for these (``work/step.py``); a script
has no call to repeat, so the step right after the window is the work step:
from the window's last boundary to the next one it runs with line labels on,
the profiler recording input shapes and allocator events, and every tensor
autograd saves for backward seen through ``saved_tensors_hooks``. That step is
already left out of the unprofiled reference (``session.py``: the first step
after the profiler stops), so no timed figure changes; the figures are per
step, as the times are. The same ``figures.measure`` and ``attach.write_work``
as a marked function turn the profile into each line's fields.

The hooks and the profiler open at one boundary and close at the next: both
are per-thread stacks the script's own code leaves balanced within a step.
A script that ends inside the work step keeps its result without these figures.
"""

from __future__ import annotations

from typing import Any

import torch

from trainium_lens.harness.work.attach import measured, write_work
from trainium_lens.harness.work.figures import SOURCE_NOTE
from trainium_lens.harness.work.step import SavedTensors, WorkProfile

RECORDED = "the step after the window"
NOTE = SOURCE_NOTE.replace("one extra labelled call after the timed steps", f"{RECORDED}, labelled")


class ScriptWork:
    """One step recorded for its work, between two step boundaries."""

    def __init__(self, run: Any):
        self.run = run  # ScriptRun: its backend, labeler, events
        self.prof: Any = None
        self.opened: list[Any] = []  # what _start opened, to close in reverse
        self.saved = SavedTensors()
        self.before: int | None = None
        self.w: dict | None = None
        self.wp: WorkProfile | None = None

    @property
    def running(self) -> bool:
        return self.prof is not None

    def start(self) -> None:
        try:
            self._start()
        except Exception as exc:
            self._lost(exc)

    def stop(self) -> None:
        """At the next boundary: the figures, kept for every document written after."""
        if not self.running:
            return
        try:
            self._stop()
        except Exception as exc:
            self._lost(exc)

    def _lost(self, exc: Exception) -> None:
        # the timed figures stand; say why these are missing
        self.abandon()
        self.w = None
        self.run.events.warning(f"no FLOP/byte/memory figures: {type(exc).__name__}: {exc}")

    def _start(self) -> None:
        run = self.run
        run.events.stage("work", None, "FLOPs, bytes, memory: the next step, shapes and allocations recorded")
        cuda = run.backend.name == "cuda"
        if cuda:
            run.backend.sync()
            torch.cuda.reset_peak_memory_stats()
            self.before = torch.cuda.memory_allocated()
        # a schedule: the profiler opens a ProfilerStep range, by which the attribution finds the step
        self.prof = torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU],
            record_shapes=True,
            profile_memory=True,
            schedule=lambda _step: torch.profiler.ProfilerAction.RECORD,
        )
        hooks = torch.autograd.graph.saved_tensors_hooks(self.saved.pack, self.saved.unpack)
        hooks.__enter__()
        self.opened.append(lambda: hooks.__exit__(None, None, None))
        run.labeler.__enter__()
        self.opened.append(lambda: run.labeler.__exit__(None, None, None))
        self.prof.start()
        self.opened.append(self.prof.stop)

    def _close(self) -> Any:
        """Close what ``_start`` opened, the last first; the first error is raised after."""
        prof, self.prof = self.prof, None
        error: Exception | None = None
        while self.opened:
            try:
                self.opened.pop()()
            except Exception as exc:
                error = error or exc
        if error is not None:
            raise error
        return prof

    def _stop(self) -> None:
        run = self.run
        run.backend.sync()
        peak = torch.cuda.max_memory_allocated() if run.backend.name == "cuda" else None
        prof = self._close()
        self.wp = WorkProfile(prof, self.saved.records, True, self.before, peak)
        self.w = measured(run, self.wp, None, None)
        if self.w is not None:
            self.w["work"]["note"] = NOTE

    def abandon(self) -> None:
        """The script ended inside the work step: its figures are not there."""
        if self.running:
            try:
                self._close()
            except Exception:
                pass

    def write(self, doc: dict) -> None:
        if self.w is not None and self.wp is not None:
            write_work(doc, self.run, self.wp, self.w, None, recorded=RECORDED)

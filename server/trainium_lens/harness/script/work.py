"""The work step of an unmodified script: FLOPs, bytes and memory per line.

A marked function gets one extra call for these (``work/step.py``); a script
has no call to repeat, so the step right after the window is the work step:
from the window's last boundary to the next one it runs with line labels on,
the profiler recording input shapes and allocator events, and every tensor
autograd saves for backward seen through ``saved_tensors_hooks``. That step is
already left out of the unprofiled reference (``session.py``: the first step
after the profiler stops), so no timed figure changes; the figures are per
step, as the times are. The same recorder (``work/step.py``'s ``WorkRecorder``),
``figures.measure`` and ``attach.write_work`` as a marked function's extra call
record the step and turn it into each line's fields.

The hooks and the profiler open at one boundary and close at the next: both
are per-thread stacks the script's own code leaves balanced within a step.
A script that ends inside the work step keeps its result without these figures.
"""

from __future__ import annotations

from typing import Any

from trainium_lens.harness.work.attach import measured, write_work
from trainium_lens.harness.work.figures import SOURCE_NOTE
from trainium_lens.harness.work.step import WorkProfile, WorkRecorder

RECORDED = "the step after the window"
NOTE = SOURCE_NOTE.replace("one extra labelled call after the timed steps", f"{RECORDED}, labelled")


class ScriptWork:
    """One step recorded for its work, between two step boundaries."""

    def __init__(self, run: Any):
        self.run = run  # ScriptRun: its backend, labeler, events
        self.recorder: WorkRecorder | None = None
        self.labelled = False
        self.w: dict | None = None
        self.wp: WorkProfile | None = None

    def start(self) -> None:
        run = self.run
        run.events.stage("work", None, "FLOPs, bytes, memory: the next step, shapes and allocations recorded")
        try:
            self.recorder = WorkRecorder(run.backend)
            self.recorder.start()
            run.labeler.__enter__()
            self.labelled = True
        except Exception as exc:
            self._lost(exc)

    def stop(self) -> None:
        """At the next boundary: the figures, kept for every document written after."""
        if self.recorder is None:
            return
        try:
            self._unlabel()
            recorder, self.recorder = self.recorder, None
            self.wp = recorder.stop()
        except Exception as exc:
            self._lost(exc)
            return
        self.w = measured(self.run, self.wp, None, None)
        if self.w is not None:
            self.w["work"]["note"] = NOTE

    def _unlabel(self) -> None:
        if self.labelled:
            self.labelled = False
            self.run.labeler.__exit__(None, None, None)

    def _lost(self, exc: Exception) -> None:
        # the timed figures stand; say why these are missing
        self.abandon()
        self.w = None
        self.run.events.warning(f"no FLOP/byte/memory figures: {type(exc).__name__}: {exc}")

    def abandon(self) -> None:
        """The script ended inside the work step (or it failed): no figures."""
        try:
            self._unlabel()
        except Exception:
            pass
        if self.recorder is not None:
            self.recorder.abandon()
            self.recorder = None

    def ended(self) -> None:
        """The script ended inside the work step: the result is written without its figures."""
        if self.recorder is not None:
            self.abandon()
            self.run.events.warning(
                "the script ended during the step after the window: no FLOP/byte/memory figures "
                "(give it one more step to have them)"
            )

    def write(self, doc: dict) -> None:
        if self.w is not None and self.wp is not None:
            write_work(doc, self.run, self.wp, self.w, None, recorded=RECORDED)

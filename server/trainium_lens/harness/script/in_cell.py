"""A notebook cell that loops over its own steps (``%%trainium_lens`` above a
training loop): run once, in the kernel's own process, its steps N..M profiled
from the optimizer's step hooks as ``trainium-lens run`` profiles a script's
(``session.py``: the same detector, window, twins, work step and reference steps).

What differs from a script's process, which ends with its run: the kernel lives
on after the cell, so everything the run put in goes with the cell — the step
hooks, the wrapper on the optimizer's ``step``, the DataLoader's timing; no
``atexit`` and no ``sys.excepthook`` are taken (``ScriptRun.arm``); the batch is
kept in memory for the magic, not written; and the line labels end their chain at
``run_cell``, the frame that runs the cell's code (the magic's own frames above it
are the kernel's, not the user's lines).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trainium_lens.harness.eager.lines import LineLabeler
from trainium_lens.harness.script.session import ScriptRun


def run_cell(code: Any, namespace: dict) -> None:
    """The cell's code in the kernel's namespace: the labels' chain ends here."""
    exec(code, namespace)


class CellEvents:
    """A script run's events (``arm.Events``' shape) into the magic's collected ones."""

    rank = None
    place: dict = {}

    def __init__(self, inner: Any):
        self.inner = inner

    def emit(self, event: str, **fields: Any) -> None:
        self.inner.emit(event, **fields)

    def stage(self, stage: str, function: str | None, message: str, **extra: Any) -> None:
        self.inner.stage(stage, function, message, **extra)

    def warning(self, message: str) -> None:
        self.inner.warning(message)


class CellLoopRun(ScriptRun):
    def __init__(self, spec: Any, events: Any, backend: Any, cell_name: Callable[[str], str | None]):
        super().__init__(spec, CellEvents(events), backend)
        self.cell_name = cell_name
        self.batch: dict | None = None

    def _prepare(self) -> None:
        self.user.cell_name = self.cell_name  # every cell of the kernel is the user's
        super()._prepare()
        self.labeler = LineLabeler(self.user, run_cell.__code__, device_backend=self.backend.device != "cpu")

    def _write(self) -> None:
        batch = self._batch()
        if batch is not None:
            self.batch = batch

    def stop(self, keep: bool) -> None:
        """The cell ended (``keep``: without raising): the window closed if the loop
        ended inside it, the result built if the window was complete, and every hook
        the run put into the kernel removed."""
        self.busy = True  # no boundary from here on
        try:
            if self.prof is not None and self.doc is None:  # the loop ended inside the window
                self._end_labels()
                try:
                    self.prof.stop()
                except Exception:  # noqa: BLE001 - a profiler that never started
                    pass
            if keep:
                self.work.ended()  # a loop that ended inside the work step
                self._write()
            else:
                self.work.abandon()
        finally:
            self.aside = True
            self.optimizers.seen_enough()
            self.detector.remove()
            self.detector.unwrap()

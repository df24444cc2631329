"""The optimizer trials of ``trainium-lens run`` (``eager/optim_trials.py``): which
``step`` implementation (``foreach=False``/``True``, ``fused=True``) is fastest for
the script's own optimizers, measured on copies of their parameters, gradients
and state, as for a marked function.

The optimizers are the ones whose ``step`` runs in the unprofiled step before the
window (watched from the boundary before it, or from the start when the window
starts at step 2); their trials run at the window's end, inside that boundary:
the gradients are the window's last step's, and the pause is not in any step's
wall (the reference steps after the window are timed from the boundary on).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from trainium_lens.harness.eager.optim_trials import OptimizerWatch
from trainium_lens.harness.eager.optim_trials import attach as attach_trials
from trainium_lens.harness.eager.optim_trials import measure as measure_optimizers


class ScriptOptimizers:
    def __init__(self, user: Any):
        self.watcher = OptimizerWatch(user)
        self.open: contextlib.ExitStack | None = None
        self.measured: list[dict] = []

    def watch(self) -> None:
        if self.open is None:
            self.open = contextlib.ExitStack()
            self.open.enter_context(self.watcher.watch())

    def seen_enough(self) -> None:
        """Stop watching; the gradients' snapshot goes (at the window's end the
        parameters hold their own gradients: the boundary is the step's post-hook)."""
        if self.open is not None:
            self.open.close()
            self.open = None
        for seen in self.watcher.seen.values():
            seen.grads = {}

    def trials(self, sync: Callable[[], None], events: Any) -> None:
        """Time them now (the window's end); ``attach`` puts them on each document."""
        if not self.watcher.seen:
            return
        events.stage("optimizers", None, "timing the optimizers' step implementations on copies")
        try:
            self.measured = measure_optimizers(self.watcher, sync)
        except Exception as exc:  # noqa: BLE001 - no trials is no finding, never a failed run
            events.warning(f"the optimizer trials failed: {type(exc).__name__}: {exc}")

    def attach(self, doc: dict) -> None:
        attach_trials(doc["optimizers"], self.measured)

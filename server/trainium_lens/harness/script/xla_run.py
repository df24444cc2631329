"""The profiled window of an unmodified torch-xla script (``run --backend xla``).

On torch-xla a step's ops are only traced when the script calls them: the graph
runs at the next ``torch_xla.sync()`` (``xm.mark_step()``, a ``MpDeviceLoader``'s
next batch and ``torch_xla.step()`` all end in it). So a step found by
``detect.py`` (the optimizer's step, ``--step-on``) is *pending* until that sync
has executed it; the boundary is there, after the device finished (or, for a
script that never syncs, at the next step found, synced by the harness). The
protocol is the xla backend's (``xla/backend.py``), on the script's own steps:

* steps 1 and 2 trace with the HLO's source frames and the backward tags on
  (``xla/tags.py``): the graphs compiled then keep them (the first step's graph
  is not the steady one: an optimizer makes its state in it);
* steps 3..N−1 and the steps after the window (``reference.py``) are the unprofiled
  reference, traced as the user's run traces them (no frames, no tags: the
  compiled executable is reused, its metadata is not part of the graph's hash);
  a reference step that compiled is left out of it;
* steps N..M: frames and tags on, inside one ``start_trace``/``stop_trace``,
  each step's start marked by an ``xp.Trace`` scope that ends at the first sync
  after it, whoever syncs (torch-xla refuses a sync inside a scope);
  ``xla/result.py`` reads the capture into the same result a marked function
  gets. FLOPs and bytes come from the window's own HLO: no work step.
"""

from __future__ import annotations

import os
import statistics
import sys
from types import SimpleNamespace
from typing import Any

from trainium_lens.harness.eager import steady
from trainium_lens.harness.script.document import add_script_fields, function_of
from trainium_lens.harness.script.hooks import never
from trainium_lens.harness.script.session import ScriptRun
from trainium_lens.harness.xla import debug_log, result
from trainium_lens.harness.xla.tags import StepTagger, TagTable
from trainium_lens.harness.xla.xplane import STEP_MARKER

# Steps traced with frames and tags before any plain one: the first step's graph
# differs from the steady one (an optimizer makes its state in it), so the second
# compiles too, and the window reuses what they compiled (with its metadata)
COMPILING = 2


class _NoTrials:
    """The optimizer trials run on the torch.profiler backends only."""

    def watch(self) -> None: ...
    def seen_enough(self) -> None: ...
    def trials(self, *_a: Any) -> None: ...
    def attach(self, _doc: dict) -> None: ...


class _NoWorkStep:
    """FLOPs and bytes per line come from the window's HLO (``xla/work.py``)."""

    def start(self) -> None: ...
    def stop(self) -> None: ...
    def ended(self) -> None: ...
    def write(self, _doc: dict) -> None: ...


class XlaScriptRun(ScriptRun):
    def _prepare(self) -> None:
        self.paired = False
        self.optimizers = _NoTrials()
        self.work = _NoWorkStep()
        self.tagger = StepTagger(self.user.relpath, never.__code__, table=TagTable())
        self.tagger.__enter__()  # step 1 compiles with the backward tags
        self.plain = False
        self.pending: str | None = None  # a step traced, not yet executed: its detector
        self.unsynced = False  # a step ended without the script's own sync
        self.scope: Any = None
        self.compiles_seen = 0
        self.compiled_reference = 0  # reference steps left out: they compiled
        self.compiles0 = 0
        self.graphs: list[int] = []
        self.executed0 = 0
        self.xla_warnings: list[str] = []
        # torch-xla's execution log (xla/debug_log.py), where the tool set it: its offset
        # at the end of each step from the one before the window on
        ours = os.environ.get(debug_log.OURS)
        self.xla_log = ours if ours and os.environ.get(debug_log.FILE) == ours else None
        self.log_marks: dict[int, int] = {}
        self.checked: dict | None = None  # the cross-check, made before the log is retired
        # with neither optimizer nor module forward found, the log's repeating pattern is the step
        self.finder = (
            debug_log.StepFinder(self.xla_log, self.backend.executions)
            if self.xla_log and not self.spec.step_on
            else None
        )
        self._wrap_sync()

    # -- where a step ends --------------------------------------------------------
    def _wrap_sync(self) -> None:
        """``torch_xla.sync`` is what ``xm.mark_step``, ``MpDeviceLoader`` and
        ``torch_xla.step()`` call (the package's attribute, or its module's global:
        ``torch_xla.step()``'s own syncs look the global up)."""
        import torch_xla

        # not ``import torch_xla.torch_xla as module``: the package's star import of its
        # ``torch_xla`` submodule rebinds the attribute ``torch_xla.torch_xla`` to the
        # package itself (the submodule imports it under that name)
        module: Any = sys.modules["torch_xla.torch_xla"]

        original = module.sync
        run = self

        def sync(*args: Any, **kwargs: Any) -> Any:
            if os.getpid() != run.pid:
                return original(*args, **kwargs)
            # torch-xla refuses a sync inside an xp.Trace scope ("Expecting scope to be
            # empty"), and a step may sync before it ends: `with torch_xla.step():` syncs on
            # entry, a MpDeviceLoader on each micro-batch. So the step's scope ends at the
            # first sync, whoever calls it: only its start marks the step (xla/result.py).
            run._close_scope()
            if run.pending is None or run.busy or run.aside:
                out = original(*args, **kwargs)
                if run.finder is not None and not run.busy and not run.aside:
                    run._log_sync()
                return out
            out = original(*args, **kwargs)
            run._step_ended()
            return out

        sync.__wrapped__ = original  # type: ignore[attr-defined]
        module.sync = sync
        torch_xla.sync = sync

    def _log_sync(self) -> None:
        """After a sync no detector's step waited for: the log's pattern may be the step."""
        finder = self.finder
        assert finder is not None
        if self.detector_name not in (None, debug_log.FINDER):
            self.finder = None  # the optimizer's or the forward's steps count
            return
        if finder.turn_ended():
            if self.detector_name is None:  # from now on the detector's hooks end no step
                self.detector.framework = debug_log.FINDER
            ScriptRun.at_boundary(self, debug_log.FINDER)
        elif finder.gave_up():
            self.finder = None

    def at_boundary(self, detector: str) -> None:
        if os.getpid() != self.pid or self.busy or self.aside:
            return
        if self.pending is not None:  # the last step was never synced by the script
            if not self.unsynced:
                self.unsynced = True
                self.events.warning(
                    "the script calls no torch_xla.sync() (or xm.mark_step()) after its optimizer step: "
                    "each step ends where trainium-lens synced, with the next step's traced ops"
                )
            self._close_scope()
            self._step_ended()
        self.pending = detector

    def _step_ended(self) -> None:
        detector, self.pending = self.pending, None
        if detector is not None:
            super().at_boundary(detector)

    def _close_scope(self) -> None:
        if self.scope is not None:
            scope, self.scope = self.scope, None
            scope.__exit__(None, None, None)

    # -- the steps around the window --------------------------------------------
    def _on_step(self, detector: str) -> None:
        if self.step + 1 >= self.first - 1:  # the script's sync has run the step's graphs
            self.log_marks[self.step + 1] = debug_log.offset(self.xla_log)
        counted = len(self.before) + len(self.after)
        super()._on_step(detector)
        k = self.step
        compiles = self.backend.compiles()
        if compiles > self.compiles_seen and len(self.before) + len(self.after) > counted:
            # a reference step that compiled (the first traced without frames may): not the step's time
            (self.after if self.after else self.before).pop()
            self.compiled_reference += 1
        self.compiles_seen = compiles
        if k == min(COMPILING, self.first - 1):
            self.compiles0 = compiles  # from here on, a compile means the graph changed
        if k == COMPILING and self.first - 1 > COMPILING:
            self._tracing(plain=True)

    def _tracing(self, plain: bool) -> None:
        """Plain: traced as the user's run traces it (no frames, no tags)."""
        if plain == self.plain:
            return
        setter = getattr(self.backend.torch_xla._XLAC, "_set_ir_debug", None)
        if setter is not None:
            setter(not plain)
        if plain:
            self.tagger.__exit__(None, None, None)
        else:
            self.tagger.__enter__()
        self.plain = plain

    # -- the window ---------------------------------------------------------------
    def _start_window(self) -> None:
        self._tracing(plain=False)
        os.makedirs(self.run_dir, exist_ok=True)
        self.run_id = f"{self.spec.batch_id}-0"
        self.log_dir = os.path.join(self.run_dir, f"{self.run_id}.xla-profile")
        device = self.backend.device_capture
        if device is not None:
            device.mark()
            device.before_measured()
        self.compiles_at_window = self.backend.compiles()
        self.tagger.counting = True
        self.backend.xp.start_trace(self.log_dir)
        self.prof = SimpleNamespace(stop=self._stop_trace)  # what the script's exit stops
        self._begin_step(self.first)

    def _stop_trace(self) -> None:
        self._close_scope()
        self.backend.xp.stop_trace()
        self.tagger.counting = False

    def _begin_step(self, k: int) -> None:
        self._step_begins(k, labelled=True)
        self.executed0 = self.backend.executions()
        self.scope = self.backend.xp.Trace(f"{STEP_MARKER}{k - self.first}")
        self.scope.__enter__()

    def _next_window_step(self, k: int) -> None:
        self.graphs.append(self.backend.executions() - self.executed0)
        self._begin_step(k)

    def _end_window(self) -> None:
        self.graphs.append(self.backend.executions() - self.executed0)
        self._stop_trace()
        self.prof = None
        self.compiles_active = self.backend.compiles() - self.compiles_at_window
        self._tracing(plain=True)
        self.events.stage("export", None, "joining executed HLO instructions with their source lines")
        for s in self.samples:
            s["clean"] = steady.clean(s.get("wall_us") or 0.0, s.get("delay_us"))
        device = self.backend.device_capture
        self.captured = result.read_window(
            self.log_dir,
            device is not None,
            self.user.relpath,
            self.tagger,
            self.source.line,
            os.path.join(self.run_dir, f"{self.run_id}.trace.json"),
        )
        self.views = result.device_views(device, os.path.join(self.run_dir, f"{self.run_id}.neuron-view"))
        self.xla_warnings = result.warnings_of(
            self.captured, self.views, self.backend, self.tagger, "the script"
        )
        disagreement = debug_log.disagreement(self._cross_check())
        if disagreement:
            self.xla_warnings.append(disagreement)
        for w in self.xla_warnings:
            self.events.warning(w)
        self.doc = self._document([])

    def _document(self, wall: list[float]) -> dict:
        spec = self.spec
        doc = result.document(
            self.captured,
            run_id=self.run_id,
            batch_id=spec.batch_id,
            host=spec.host,
            backend=self.backend,
            function=function_of(self, wall),
            wall_us=wall,
            step_wall_us=[s["wall_us"] for s in self.samples if s.get("wall_us")],
            graphs=self.graphs,
            tagger=self.tagger,
            compiles_in_active_steps=self.compiles_active,
            recompiles=self.backend.compiles() - self.compiles0,
            warnings=list(self.xla_warnings),
            views=self.views,
            run_dir=self.run_dir,
            workspace_root=spec.workspace_root,
            output={},
        )
        add_script_fields(self, doc)
        doc["script"]["reference_compiled"] = self.compiled_reference
        doc["script"]["xla_log"] = self._cross_check()
        if wall:
            doc["totals"]["wall_us_median"] = statistics.median(wall)
        return doc

    def _write(self) -> None:
        super()._write()
        self.finder = None  # as the detector's hooks: no step is counted after the result
        if self.xla_log is not None:  # the check is made (the finder counts with the metrics)
            self.checked = self._cross_check()
            debug_log.retire(self.xla_log)
            self.xla_log = None

    def _cross_check(self) -> dict:
        """The steps found against torch-xla's own log of executions (``xla/debug_log.py``)."""
        if self.checked is not None:
            return self.checked
        if self.xla_log is None:
            why = f"{debug_log.LEVEL} is the script's own: its log left as it set it"
            return debug_log.counted(self.graphs, why)
        marks = self.log_marks
        window = range(self.first, self.window_last + 1)
        if any(k - 1 not in marks or k not in marks for k in window):
            return debug_log.counted(self.graphs, "a step of the window was not marked in the log")
        try:
            steps = [debug_log.executions(self.xla_log, marks[k - 1], marks[k]) for k in window]
            steady = debug_log.executions(self.xla_log, marks[self.first - 1], marks[max(marks)])
        except OSError as exc:
            return debug_log.counted(self.graphs, f"torch-xla's log unread ({exc.strerror})")
        return debug_log.cross_check(steps, steady)

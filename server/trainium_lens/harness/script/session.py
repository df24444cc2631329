"""The profiled window of an unmodified script, run from its own step hooks.

Steps are counted by ``detect.Detector``; at each boundary (after step k):

* k < N−1: the step's wall is timed (the unprofiled reference, steps 2..N−1;
  step 1 holds compiles and first-touch costs; ``reference.py`` says which of
  the steps timed the reference uses);
* k = N−1: calibrate the cpu clock, start the profiler (and the line labels):
  steps N.. are recorded. On the cpu clock each measured step is a labelled
  step followed by its plain twin (``attribution/tree.py`` says why), so the
  window spans 2×(M−N+1) steps; device clocks: M−N+1;
* the window's last step: the profiler stops, the events are attributed to
  lines (the same ``attribute``/``result_document`` as a marked function);
* the step after it is the work step (``work.py``: FLOPs, bytes, memory per
  line), left out of the reference; ``--exit-after`` ends the process at its
  end, cleanly;
* the hooks go on timing up to ``SETTLE + AFTER`` unprofiled steps, the rest
  of the reference. The batch is written then, at ``--exit-after``, or when the
  script ends.
"""

from __future__ import annotations

import atexit
import os
import statistics
import time
import traceback
from types import SimpleNamespace
from typing import Any

import torch

from trainium_lens.harness.attribution import build
from trainium_lens.harness.attribution.trace_tags import export_tagged
from trainium_lens.harness.attribution.tree import attribute
from trainium_lens.harness.eager import calibration_store, measure, steady
from trainium_lens.harness.eager.lines import LineLabeler
from trainium_lens.harness.events import internal_failure, write_json_atomic
from trainium_lens.harness.job.loader import UserCode, resolve_include
from trainium_lens.harness.runtime.host import HostWindow, RunQueueDelay
from trainium_lens.harness.script.detect import Detector
from trainium_lens.harness.script.document import profiled_document
from trainium_lens.harness.script.hooks import (
    chain_excepthook,
    exit_cleanly,
    never,
    time_data_loader,
    watch_own_profilers,
)
from trainium_lens.harness.script.on_xla import HINT, runs_on_xla
from trainium_lens.harness.script.optimizers import ScriptOptimizers
from trainium_lens.harness.script.reference import chosen, last_timed
from trainium_lens.harness.script.work import ScriptWork
from trainium_lens.harness.spec import ScriptSpec

# why the harness stands aside when the script starts a torch.profiler of its own
OWN_PROFILER = (
    "the script runs torch.profiler itself (one profiler at a time): trainium-lens stood aside, "
    "the script's own profile is as without it"
)


class ScriptRun:
    """The profiled window on the torch.profiler backends (cpu, cuda, neuron);
    ``xla_run.XlaScriptRun`` is the same window on torch-xla (``start.py`` picks)."""

    def __init__(self, spec: ScriptSpec, events: Any, backend: Any):
        self.spec, self.events, self.backend = spec, events, backend
        self.first, self.last_measured = spec.steps
        self.rank = events.rank
        base = spec.run_dir
        self.run_dir = os.path.join(base, f"rank{self.rank}") if self.rank is not None else base
        self.step = 0
        self.detector_name: str | None = None
        self.t_last: float | None = None
        # (step, wall µs) of the unprofiled steps timed before and after the window
        self.before: list[tuple[int, float]] = []
        self.after: list[tuple[int, float]] = []
        self.prof: Any = None
        self.labelled_on = False
        self.doc: dict | None = None
        self.written = False
        self.samples: list[dict] = []
        self.pid = os.getpid()
        self.busy = False
        self.aside = False
        self.own_profiler = False  # the script has started a torch.profiler of its own
        # a DataLoader's __next__ in each step (seconds) and the line it was called from:
        # the step's wait for data, timed in the unprofiled reference steps
        self.data_step = 0.0
        self.data_site: tuple[str, int] | None = None
        self.data_waits: dict[int, float] = {}  # step -> its wait (µs)

    # -- setup ------------------------------------------------------------------
    def install(self) -> None:
        if not self.arm():
            return
        time_data_loader(self)
        watch_own_profilers(self)
        atexit.register(self._at_exit)
        chain_excepthook(self)
        self.say_armed()

    def arm(self) -> bool:
        """The step hooks and what the window needs; False when the script runs on
        unprofiled (said in an ``aside``). What only a whole process may take (its
        exit, its excepthook) is ``install``'s: a notebook cell's loop arms this part
        only (``in_cell.py``)."""
        include = []
        for name in self.spec.include:
            found = resolve_include(name)
            if found is None:
                self.events.warning(f"--include {name}: no installed package or module of that name")
            else:
                include.append(found)
        self.user = UserCode(self.spec.workspace_root, include)
        self.source = build.SourceText(self.user.root, self.user.abspath)
        self._prepare()
        measured = self.last_measured - self.first + 1
        self.window_last = self.first + measured * (2 if self.paired else 1) - 1
        self.detector = Detector(self.at_boundary, self.spec.step_on, self.user.root, self.events.warning)
        try:
            self.detector.install()
        except ValueError as exc:  # a --step-on that names nothing: the script runs on, unprofiled
            self.events.emit("aside", why=str(exc))
            return False
        self.delay = RunQueueDelay()
        if self.first <= 2:
            self.optimizers.watch()
        return True

    def say_armed(self) -> None:
        self.events.emit(
            "armed",
            backend=self.backend.name,
            window=[self.first, self.window_last],
            tried=self.detector.tried,
        )

    def _prepare(self) -> None:
        """What this backend's window needs before the first step."""
        self.labeler = LineLabeler(self.user, never.__code__, device_backend=self.backend.device != "cpu")
        self.paired = not self.backend.device_clock
        # the optimizers that step in the step before the window (their trials run at
        # its end, on copies: optim_trials.py), watched from the boundary before it
        self.optimizers: Any = ScriptOptimizers(self.user)
        self.work: Any = ScriptWork(self)

    # -- the boundary after each step ---------------------------------------------
    def at_boundary(self, detector: str) -> None:
        # a forked child (DataLoader worker) inherited the hooks; and the harness's
        # own work at a boundary (calibration runs modules) is no step
        if os.getpid() != self.pid or self.busy or self.aside:
            return
        self.busy = True
        try:
            self._on_step(detector)
        except Exception as exc:
            self.aside = True  # the script runs on, unprofiled
            self._fail(exc)
        finally:
            self.busy = False

    def _on_step(self, detector: str) -> None:
        if self.detector_name is None:
            self.detector_name = detector
            self.events.emit("detector", name=detector)
        self.step += 1
        k = self.step
        if k == 1 and self.backend.name != "xla" and runs_on_xla(self.detector):
            self._stand_aside(HINT)  # the CPU clock would time its tracing only (on_xla.py)
            return
        sync = self.backend.sync
        last = last_timed(self.window_last)
        if k <= last:
            sync()
        now = time.perf_counter()
        wall = (now - self.t_last) * 1e6 if self.t_last is not None else None
        if self.first <= k <= self.window_last:
            d = self.delay.read_us()
            self.samples[-1].update(self.detector.step_info or {})  # a framework's word on it
            self.samples[-1]["wall_us"] = wall
            self.samples[-1]["delay_us"] = None if d is None or self.d0 is None else d - self.d0
        elif wall is not None and 2 <= k < self.first:
            self.before.append((k, wall))
            self.data_waits[k] = self.data_step * 1e6
        elif wall is not None and self.window_last + 1 < k <= last:
            self.after.append((k, wall))
            self.data_waits[k] = self.data_step * 1e6
        self.data_step = 0.0
        if k == self.first - 2:
            self.optimizers.watch()
        if k == self.first - 1:
            self.optimizers.seen_enough()
            self._start_window()
        elif self.first <= k < self.window_last:
            self._next_window_step(k + 1)
        elif k == self.window_last:
            self._end_window()
            self.work.start()
        elif k == self.window_last + 1:
            self.work.stop()
            if self.spec.exit_after:
                self._write()
                exit_cleanly()
        elif k == last:
            self._write()
            self.detector.remove()
        self.t_last = time.perf_counter()

    def script_profiles(self) -> None:
        """The script starts a torch.profiler of its own (``hooks.watch_own_profilers``):
        kineto runs one at a time, and the script's must work as without the tool. Before
        the window ends, the harness stands aside (its profiler, if recording, stopped
        first; nothing is written); after it, only the work step's recording, if on, is
        dropped and the result stands without its FLOP/byte/memory figures."""
        self.own_profiler = True
        if self.aside or self.written or os.getpid() != self.pid:
            return
        if self.doc is None:
            if self.prof is not None:  # the window is recording
                self._end_labels()
                try:
                    self.prof.stop()
                except Exception:
                    pass
                self.prof = None
            self._stand_aside()
        elif getattr(self.work, "recorder", None) is not None:
            self.work.abandon()
            self.events.warning(
                "the script started its own torch.profiler in the step after the window: "
                "no FLOP/byte/memory figures (one profiler at a time)"
            )

    def _stand_aside(self, why: str = OWN_PROFILER) -> None:
        """Stop profiling; the script runs on, unprofiled, to its end."""
        self.aside = True
        self.detector.remove()
        self.events.emit("aside", why=why)

    def _start_window(self) -> None:
        if self.own_profiler or torch.autograd.profiler._is_profiler_enabled:
            self._stand_aside()
            return
        ctx = SimpleNamespace(backend=self.backend)
        self.calibration = None
        if not self.backend.device_clock:
            self.calibration = calibration_store.for_run(torch, self.backend, ctx, self.run_dir, self.events)
        os.makedirs(self.run_dir, exist_ok=True)
        self.run_id = f"{self.spec.batch_id}-0"
        self.window = HostWindow().start()
        self.delay.refresh()
        self.backend.start_capture()
        self.prof = torch.profiler.profile(
            activities=self.backend.activities(),
            schedule=lambda _step: torch.profiler.ProfilerAction.RECORD,
            **measure.profiler_kwargs(ctx, self.run_dir, self.run_id),
        )
        self.prof.start()
        self._begin_step(self.first)

    def _begin_step(self, k: int) -> None:
        labelled = not self.paired or (k - self.first) % 2 == 0
        if labelled and not self.labelled_on:
            self.labeler.__enter__()
            self.labelled_on = True
        self._step_begins(k, labelled)

    def _step_begins(self, k: int, labelled: bool) -> None:
        """A measured step starts: its sample, its progress line, the run-queue delay so far."""
        self.samples.append({"step": k, "labelled": labelled})
        self.events.stage(
            "profile",
            None,
            f"profiling step {k} ({self.first}..{self.window_last})",
            step=k - self.first + 1,
            of=self.window_last - self.first + 1,
        )
        self.d0 = self.delay.read_us()

    def _end_labels(self) -> None:
        if self.labelled_on:
            self.labelled_on = False
            self.labeler.__exit__(None, None, None)

    def _next_window_step(self, k: int) -> None:
        self._end_labels()
        self.prof.step()
        self._begin_step(k)

    def _end_window(self) -> None:
        self._end_labels()
        self.prof.stop()
        signals_raw = self.backend.stop_capture()
        self.events.stage("export", None, "attributing op time to lines")
        judged = self.samples[1::2] if self.paired else self.samples
        for s in judged:
            s["clean"] = steady.clean(s.get("wall_us") or 0.0, s.get("delay_us"))
        keep: list[bool] | None = [s["clean"] for s in judged]
        if sum(keep or []) < max(1, (len(judged) + 1) // 2):
            keep = None  # too few clean steps to choose from: all used, the run judged noisy
        cal = self.calibration or {}
        att = attribute(
            self.prof.events(),
            self.labeler.labels,
            self.backend.device_clock,
            None,
            torch.autograd.DeviceType.CPU,
            paired=self.paired,
            record_events=True,  # the trace's events get their lines (trace_tags)
            keep=keep,
            calls_per_step=1,
            per_depth_us=cal.get("per_depth_us", 0.0),
            per_top_us=cal.get("per_top_us"),
            gap_factor=cal.get("gap_factor", 1.0),
        )
        if att.mismatched_steps:
            self.events.warning(
                f"{att.mismatched_steps} of {att.steps} steps ran different ops with and without line labels "
                "(e.g. a print of the loss every few steps); their CPU times include the labels' overhead"
            )
        self.att, self.keep, self.judged = att, keep, judged
        self.trace, self.offset_us = self._export_trace(att)
        self.signals_raw = signals_raw
        self.stability_window = self.window.stop()
        if not self.backend.device_clock:  # torch's threads: analysis/noise.py's hint under outside load
            self.stability_window["threads"] = torch.get_num_threads()
        self.optimizers.trials(self.backend.sync, self.events)
        # the window's counts, before the work step's labels add to them
        self.counts = (dict(self.labeler.h2d), dict(self.labeler.hits.hits), self.labeler.origins.snapshot())
        self.doc = self._document([])

    def _export_trace(self, att: Any) -> tuple[str | None, float]:
        """The window's Chrome trace, each op event tagged with its line: the
        timeline and Perfetto open it as they open a profiled function's."""
        path = os.path.join(self.run_dir, f"{self.run_id}.trace.json")
        try:
            export_tagged(self.prof, path, att, self.labeler.labels)
        except Exception as exc:  # the figures stand without it
            self.events.warning(f"could not write the Chrome trace: {exc}")
            return None, 0.0
        start_ns = None
        try:
            start_ns = int(self.prof.profiler.kineto_results.trace_start_ns())
        except Exception:
            pass
        return path, build.trace_offset_us(path, start_ns)

    def _document(self, wall: list[float]) -> dict:
        """The window's result (``document.py``): ``xla_run`` builds its own."""
        return profiled_document(self, wall)

    # -- writing --------------------------------------------------------------------
    def _batch(self) -> dict | None:
        """The batch of the window's result with the reference timed so far; once."""
        if self.written or self.doc is None:
            return None
        self.written = True
        before, after = self.reference_steps()
        wall = before + after
        doc = self._document(wall)
        doc["totals"]["wall_us_median"] = statistics.median(wall) if wall else None
        return build.batch_document(self.spec.batch_id, [doc])

    def _write(self) -> None:
        batch = self._batch()
        if batch is None:
            return
        path = os.path.join(self.run_dir, "batch.json")
        write_json_atomic(path, batch, indent=1)
        self.events.emit("result", path=os.path.abspath(path), steps=self.step, **self.events.place)

    def reference_steps(self) -> tuple[list[float], list[float]]:
        """The walls (µs) of the reference's steps before and after the window."""
        return chosen(self.before, self.after, self.window_last)

    def _at_exit(self) -> None:
        if os.getpid() != self.pid:
            return
        try:
            if self.prof is not None and self.doc is None:
                self._end_labels()
                try:
                    self.prof.stop()
                except Exception:
                    pass
            self.work.ended()  # if the script ended inside the work step
            self._write()
        except Exception as exc:
            self._fail(exc)
        self.events.emit("exit", steps=self.step, detector=self.detector_name, tried=self.detector.tried)

    def _fail(self, exc: BaseException) -> None:
        kind, message = internal_failure(exc)
        self.events.emit("error", kind=kind, message=message, traceback=traceback.format_exc())

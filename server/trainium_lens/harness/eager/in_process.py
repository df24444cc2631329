"""A callable in this very process profiled under the marked-function protocol
(``eager/run.profile_call``): a notebook cell in the user's own kernel, its
variables its namespace's. No spec on stdin and no events on stdout: the caller
passes what a spec would say and gets the batch document back.

Why in process: the kernel holds the model, the optimizer and the data the cell
uses; a subprocess would have none of them (docs/notebooks.md).
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from trainium_lens.harness.events import EventStream, HarnessError
from trainium_lens.harness.markers import Marked
from trainium_lens.harness.spec import DEFAULT_PROTOCOL, Spec


class CollectedEvents(EventStream):
    """The events of an in-process run, kept (and passed to ``on_event``) instead
    of written to a stream."""

    def __init__(self, on_event: Callable[[dict], None] | None = None):
        self.items: list[dict] = []
        self._lock = threading.Lock()
        self._on_event = on_event

    def emit(self, event: str, **fields: Any) -> None:
        item = {"event": event, **fields}
        with self._lock:
            self.items.append(item)
        if self._on_event is not None:
            self._on_event(item)

    def warnings(self) -> list[str]:
        return [str(e.get("message")) for e in self.items if e["event"] == "warning"]


@dataclass
class InProcessJob:
    """What a spec would say, for a callable of this process."""

    batch_id: str
    workspace_root: str
    run_dir: str
    rel_file: str  # the name results give the callable's file (a cell's: cell_name's)
    name: str  # the function's name in the result
    first_line: int
    last_line: int
    backend: str = "auto"
    protocol: dict[str, int] = field(default_factory=dict)  # overrides of DEFAULT_PROTOCOL
    # file name → the name results give it, for files outside the workspace that are the
    # user's (a kernel's cells); None for any other file
    cell_name: Callable[[str], str | None] | None = None
    include: list[str] = field(default_factory=list)  # installed packages whose lines count


_WATCH: list[Any] = []  # the process's one CompileWatch: it patches dynamo once per process


def profile_callable(fn: Callable[[], Any], job: InProcessJob, events: CollectedEvents) -> dict:
    """``fn()`` profiled as a marked function is (first calls, calibration, settle,
    profiled steps, unprofiled timing, work call); the batch document of one result.
    A user error raises the harness's ``HarnessError`` (kind ``user_code``) whose
    ``__context__`` is the user's own exception."""
    import sys

    try:
        import torch
    except ImportError as exc:
        raise HarnessError(
            "torch_missing", f"torch is not importable in this kernel ({sys.executable}): {exc}"
        ) from None

    from trainium_lens.harness.attribution import build
    from trainium_lens.harness.eager.compiled import CompileWatch
    from trainium_lens.harness.eager.run import Call, Session, profile_call
    from trainium_lens.harness.job.loader import UserCode, resolve_include
    from trainium_lens.harness.runtime.choose import choose

    protocol = {**DEFAULT_PROTOCOL, **job.protocol}
    spec = Spec(
        batch_id=job.batch_id,
        workspace_root=os.path.realpath(job.workspace_root),
        file=job.rel_file,
        run_dir=job.run_dir,
        backend=job.backend,
        protocol=dict(job.protocol),
    )
    backend = choose(torch, job.backend)
    for note in backend.notes:
        events.warning(note)
    include = []
    for name in job.include:
        found = resolve_include(name)
        if found is None:
            events.warning(f"--include {name}: no installed package or module of that name")
        else:
            include.append(found)
    user = UserCode(spec.workspace_root, include)
    user.cell_name = job.cell_name
    if not _WATCH:
        _WATCH.append(CompileWatch(user))
    watch = _WATCH[0]
    watch.user = user
    os.makedirs(job.run_dir, exist_ok=True)
    session = Session(spec, events, backend, None, user, job.rel_file, watch=watch)
    marked = Marked(job.name, job.first_line, job.first_line, job.last_line, {})
    try:
        result = profile_call(session, marked, 0, protocol, Call(session, fn, (), {}, job.name))
    finally:  # the kernel lives on: --include's patches go with the run
        session.include_hooks.restore()
    # as the harness's batch.json reads back (torch's version string is a str subclass)
    return json.loads(json.dumps(build.batch_document(job.batch_id, [result])))


class ProfilerInCell(RuntimeError):
    """The cell starts ``torch.profiler`` itself: a second profiler started while the
    protocol's runs kills the process (seen: the kernel died), so the cell is stopped
    before its profiler starts, in its first run, which nothing profiles."""


class CellCall:
    """A compiled cell run in its namespace, counted: the header says how many times
    the cell ran (its side effects happened that many times). Defined in the harness,
    so its frame is never the user's, whatever the workspace."""

    def __init__(self, code: Any, namespace: dict):
        self.code, self.namespace, self.calls = code, namespace, 0

    def __call__(self) -> None:
        self.calls += 1
        if self.calls > 1:
            exec(self.code, self.namespace)
            return
        with profiler_refused(lambda: False):
            exec(self.code, self.namespace)


@contextlib.contextmanager
def profiler_refused(ours: Callable[[], bool]) -> Iterator[None]:
    """Any torch profiler the cell starts raises ``ProfilerInCell`` before it starts,
    unless ``ours()`` (the harness's own, started from a step boundary)."""
    from torch.autograd import profiler

    start = profiler.profile._prepare_trace  # what every torch profiler's start runs

    def refuse(*args: Any, **kwargs: Any) -> Any:
        if ours():
            return start(*args, **kwargs)
        raise ProfilerInCell(
            "the cell starts torch.profiler itself: profile it without the magic, or "
            "without its own profiler (two profilers at once end the kernel)"
        )

    profiler.profile._prepare_trace = refuse
    try:
        yield
    finally:
        profiler.profile._prepare_trace = start


@dataclass
class LoopJob:
    """What a script spec would say, for a cell that loops over its own steps."""

    batch_id: str
    workspace_root: str
    run_dir: str
    rel_file: str  # the cell's name in results
    first_line: int  # the magic's line: the result's function line
    steps: tuple[int, int]  # the measured steps N..M of the cell's loop
    cell_name: Callable[[str], str | None]
    backend: str = "auto"
    include: list[str] = field(default_factory=list)


def profile_loop(code: Any, namespace: dict, job: LoopJob, events: CollectedEvents) -> tuple[dict, int]:
    """The cell's code run once, its loop's steps N..M profiled as ``run`` profiles a
    script's (``script/in_cell.py``); the batch document and the steps it made. The
    user's error raises ``HarnessError`` (kind ``user_code``, its ``__context__`` the
    user's exception); a loop with too few steps, ``HarnessError`` kind ``too_few_steps``."""
    import sys

    try:
        import torch
    except ImportError as exc:
        raise HarnessError(
            "torch_missing", f"torch is not importable in this kernel ({sys.executable}): {exc}"
        ) from None

    from trainium_lens.harness.runtime.choose import choose
    from trainium_lens.harness.script.hooks import time_data_loader
    from trainium_lens.harness.script.in_cell import CellLoopRun, run_cell
    from trainium_lens.harness.spec import ScriptSpec

    backend = choose(torch, job.backend)
    if backend.name == "xla":  # torch-xla's window (script/xla_run.py) is not armed in a kernel yet
        raise HarnessError("unsupported", "a cell that loops over its own steps is not profiled on xla yet")
    for note in backend.notes:
        events.warning(note)
    spec = ScriptSpec(
        batch_id=job.batch_id,
        workspace_root=os.path.realpath(job.workspace_root),
        run_dir=job.run_dir,
        command=("%%trainium_lens",),
        script_rel=job.rel_file,
        main_line=job.first_line,
        steps=job.steps,
        backend=job.backend,
        include=tuple(job.include),
    )
    os.makedirs(job.run_dir, exist_ok=True)
    run = CellLoopRun(spec, events, backend, job.cell_name)
    if not run.arm():
        raise HarnessError("aside", "the cell's steps could not be watched")
    run.say_armed()
    undo = time_data_loader(run)
    try:
        with profiler_refused(lambda: run.busy):
            try:
                run_cell(code, namespace)
            except Exception as exc:
                run.stop(keep=False)
                raise run.user.error_from(exc, "user_code", "the cell") from None
            except BaseException:  # a kernel interrupt: the profiler stopped, nothing kept
                run.stop(keep=False)
                raise
        run.stop(keep=True)
    finally:
        undo()
    if run.batch is None:
        raise HarnessError("too_few_steps", _too_few(run))
    # as the harness's batch.json reads back (torch's version string is a str subclass)
    return json.loads(json.dumps(run.batch)), run.step


def _too_few(run: Any) -> str:
    n, m = run.first, run.last_measured
    if run.step == 0:
        return f"the cell ran once and made no step (tried: {', '.join(run.detector.tried)}); nothing stored"
    twins = "" if run.window_last == m else " (each measured step with its unlabelled twin on the cpu clock)"
    return (
        f"the cell ran once and its loop made {run.step} {run.detector_name or 'optimizer'} steps; "
        f"--steps {n}:{m} needs {run.window_last}{twins}: loop longer, or ask for fewer steps "
        "(a cell that is one step: --one-step); nothing stored"
    )

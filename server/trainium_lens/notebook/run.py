"""One ``%%trainium_lens`` run in the kernel: the cell's code under the marked-function
protocol in this process (``harness/eager/in_process.py``), then the after-batch stage
``profile`` and ``run`` share (``engine/finish.py``), stored in the workspace's
``.trainium-lens/runs/`` and printed with the CLI's renderer under the cell."""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import CodeType
from typing import Any

from trainium_lens.cli.outputs import write_json
from trainium_lens.cli.render.result import render_result
from trainium_lens.cli.render.text import DEFAULT_STYLE, terminal_safe
from trainium_lens.cli.render.work import render_work
from trainium_lens.engine.finish import finish, run_folder_removed_on_failure
from trainium_lens.engine.provenance import git_state
from trainium_lens.errors import LensError, NotStored
from trainium_lens.harness.eager.in_process import (
    CellCall,
    CollectedEvents,
    InProcessJob,
    LoopJob,
    ProfilerInCell,
    profile_callable,
    profile_loop,
)
from trainium_lens.harness.events import HarnessError
from trainium_lens.model.job import Job, new_batch_id, workspace_root_for
from trainium_lens.model.result import Result
from trainium_lens.model.store import RunStore
from trainium_lens.notebook.cell import Cell, cell_names
from trainium_lens.notebook.options import CellOptions
from trainium_lens.targets.local import LocalTarget

#: The function name a cell's result carries (its file is the cell's name).
CELL_FUNCTION = "cell"


class UserCodeFailed(Exception):
    """The cell raised: ``error`` is the user's own exception, raised as it is."""

    def __init__(self, error: BaseException, cell_file: str) -> None:
        super().__init__(str(error))
        self.error, self.cell_file = error, cell_file


@dataclass
class CellRun:
    results: list[Result]
    calls: int  # how many times the cell's code ran
    loop: tuple[int, int] | None  # a cell that loops over its steps: the steps N..M profiled
    steps_made: int  # the steps its loop made (0 for a cell run as one step)
    workspace: Path
    stored: bool
    not_stored: str | None  # why the store refused, if it did
    warnings: list[str]


def workspace_of(shell: Any) -> Path:
    """Where results are stored: the work tree holding the notebook (VS Code names it in
    ``__vsc_ipynb_file__``, Jupyter Server in ``JPY_SESSION_NAME``), else holding the
    kernel's working folder; without a work tree, that folder itself."""
    ns = getattr(shell, "user_ns", {}) or {}
    for named in (ns.get("__vsc_ipynb_file__"), os.environ.get("JPY_SESSION_NAME")):
        if isinstance(named, str) and named.endswith(".ipynb") and os.path.isfile(named):
            return workspace_root_for(Path(named).resolve())
    return workspace_root_for(Path.cwd())


#: What torch's profiler library prints on the process's stderr at each start and stop
#: (``USDT:… profiler_start``): a dozen lines under the cell that say nothing to the user;
#: and c10's note when the work step's memory recording starts inside a loop cell with
#: tensors already allocated (``CPUAllocator.cpp``: their frees are not recorded, which
#: the work figures do not need).
_PROFILER_LINE = re.compile(
    r"^(USDT|STAGE):\d{4}-\d\d-\d\d .*\.cpp:\d+\]"
    r"|^\[W\d{4} [\d:.]+ CPUAllocator\.cpp:\d+\] Memory block of unknown size was allocated before"
)


@contextlib.contextmanager
def profiler_lines_dropped() -> Iterator[None]:
    """The process's stderr (file descriptor 2, where C++ writes) into a file for the
    run, then written back without the profiler's own lines. Python's ``sys.stderr``
    (a kernel's stream, warnings) is not descriptor 2 and is untouched."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):
        yield
        return
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            held.seek(0)
            kept = [
                line
                for line in held.read().decode("utf-8", "replace").splitlines(keepends=True)
                if not _PROFILER_LINE.match(line)
            ]
            if kept:
                sys.stderr.write("".join(kept))


def profile_cell(shell: Any, cell: Cell, code: CodeType, options: CellOptions, loop: bool = False) -> CellRun:
    """The cell's code in ``shell.user_ns``: run repeatedly under the protocol (a cell
    that is one step), or once with its loop's steps N..M profiled (``loop``); the
    analysed results, stored unless ``--no-store``. Raises ``UserCodeFailed`` with the
    user's exception when the cell raises, ``LensError`` for anything else."""
    workspace = workspace_of(shell)
    batch_id = new_batch_id()
    target = LocalTarget()
    run_dir = target.run_dir(Job(workspace=workspace, file=cell.rel, batch_id=batch_id))
    events = CollectedEvents()
    call = CellCall(code, shell.user_ns)
    steps = options.steps or (3, 5)  # ``run``'s default window
    made = 0
    git = git_state(workspace)
    store = None if options.no_store else RunStore(workspace)
    not_stored = None
    with run_folder_removed_on_failure(target, workspace, batch_id):
        try:
            with profiler_lines_dropped():
                if loop:
                    job = LoopJob(
                        batch_id=batch_id,
                        workspace_root=str(workspace),
                        run_dir=str(run_dir),
                        rel_file=cell.rel,
                        first_line=cell.first,
                        steps=steps,
                        cell_name=cell_names(cell.filename),
                        backend=options.backend,
                        include=options.include,
                    )
                    document, made = profile_loop(code, shell.user_ns, job, events)
                else:
                    document = profile_callable(
                        call, _job(cell, options, batch_id, workspace, run_dir), events
                    )
        except HarnessError as exc:
            cause = exc.__context__
            if isinstance(cause, ProfilerInCell):
                raise LensError(str(cause)) from None
            if exc.kind == "user_code" and cause is not None:
                raise UserCodeFailed(cause, cell.filename) from None
            raise LensError(exc.message) from None
        try:
            results = finish(
                document,
                target=target,
                workspace=workspace,
                batch_id=batch_id,
                git=git,
                store=store,
                device_lines=True,
                source=None,  # a cell is no file a fix could edit
                unstored="remove",
            )
        except NotStored as exc:
            results, not_stored = exc.results, str(exc)
    if options.json:
        data: Any = results[0].to_dict() if len(results) == 1 else [r.to_dict() for r in results]
        write_json(options.json, data)
    return CellRun(
        results,
        1 if loop else call.calls,
        steps if loop else None,
        made,
        workspace,
        store is not None and not_stored is None,
        not_stored,
        events.warnings(),
    )


def _job(cell: Cell, options: CellOptions, batch_id: str, workspace: Path, run_dir: Path) -> InProcessJob:
    return InProcessJob(
        batch_id=batch_id,
        workspace_root=str(workspace),
        run_dir=str(run_dir),
        rel_file=cell.rel,
        name=CELL_FUNCTION,
        first_line=cell.first,
        last_line=cell.last,
        backend=options.backend,
        protocol=options.protocol,
        cell_name=cell_names(cell.filename),
        include=options.include,
    )


def render(run: CellRun, what: str) -> str:
    """The text under the cell: the header (how many times the cell ran, where the
    result is), then the CLI's tables."""
    return terminal_safe("\n\n".join(["\n".join(header(run, what))] + _tables(run)))


def _tables(run: CellRun) -> list[str]:
    return [render_result(r, DEFAULT_STYLE) + render_work(r, DEFAULT_STYLE) for r in run.results]


def header(run: CellRun, what: str) -> list[str]:
    if run.loop is not None:
        n, m = run.loop
        detector = next((r.script.detector for r in run.results if r.script is not None), "") or "optimizer"
        head = [
            f"trainium-lens: {what} ran once, its loop's own steps {n}..{m} profiled as `run` profiles "
            f"a script's ({run.steps_made} {detector} steps made; its side effects happened once; "
            "its variables are in the namespace)"
        ]
    else:
        head = [
            f"trainium-lens: {what} ran {run.calls} times under the profiler's protocol "
            f"(its side effects happened {run.calls} times; its variables are in the namespace)"
        ]
    if run.stored:
        head.append(f"stored in {run.workspace / '.trainium-lens' / 'runs'}")
    elif run.not_stored:
        head.append(f"not stored: {run.not_stored}")
    if all(not r.totals.dispatches for r in run.results):
        head.append(f"{what} dispatched no torch op: there is nothing to attribute to its lines")
    head += [f"warning: {w}" for w in run.warnings]
    return head

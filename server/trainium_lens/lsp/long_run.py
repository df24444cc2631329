"""A long-running command's life in the editor, written once: profile a function
(``features/profile.py``), profile a script (``features/script.py``), measure a
fix (``features/fixes.py``) — and whatever runs user code next.

``LongRun`` holds one command in flight: its work-done progress (when the client
offers it; the cancel button sets the run's ``threading.Event``), the work in a
worker thread (targets are synchronous and cancel through that event) with its
events brought back to the event loop, ``$/cancelRequest`` stopping it too, and
its state on ``trainiumLens/runState`` (the status bar). A failure is one line:
``describe`` words the errors every run can meet, ``fail`` shows it, announces it
and makes the command's reply; ``error_diagnostic`` puts an error in the user's
code on their line.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from lsprotocol import types
from pygls.uris import from_fs_path

from trainium_lens.errors import Cancelled, LensError, TargetError, TimedOut
from trainium_lens.lsp.runs import DocumentRuns
from trainium_lens.lsp.state import LensServer

log = logging.getLogger(__name__)

RUN_STATE = "trainiumLens/runState"

T = TypeVar("T")
Events = Callable[[dict], None]


@dataclass
class Failure:
    """Why a run failed, in one line, and how loud: the reply's ``error`` and ``kind``."""

    message: str
    kind: str
    level: types.MessageType = types.MessageType.Error


def describe(err: Exception, *, cancelled: str, timed_out: str, target: str, file: str) -> Failure:
    """The errors every run can meet, in the command's words (``target``: the prefix
    of a host's refusal; ``file``: the name an OS error is about). A command words
    its own errors (the harness's, a script's) before calling this."""
    if isinstance(err, Cancelled):
        return Failure(cancelled, "cancelled", types.MessageType.Info)
    if isinstance(err, TimedOut):
        return Failure(f"{timed_out}: {err}", "timeout")
    if isinstance(err, TargetError):
        return Failure(f"{target}: {err}", "target")
    if isinstance(err, LensError):
        return Failure(str(err), "usage")
    if isinstance(err, OSError):
        return Failure(f"{file}: {err.strerror or err}", "usage")
    return Failure(f"internal error: {type(err).__name__}: {err}", "internal")


def refuse(ls: LensServer, message: str, kind: str, **reply: object) -> dict:
    """A command refused before anything ran: said, and the reply."""
    level = types.MessageType.Warning if kind == "busy" else types.MessageType.Error
    ls.show(f"Trainium Lens: {message}", level)
    return {**reply, "error": message, "kind": kind}


class LongRun:
    """One command in flight. ``host``: announce its state on ``RUN_STATE`` (None:
    a run the status bar does not show)."""

    def __init__(
        self,
        ls: LensServer,
        title: str,
        cancel: threading.Event | None = None,
        host: str | None = None,
    ) -> None:
        self.ls, self.title, self.host = ls, title, host
        self.cancel = cancel if cancel is not None else threading.Event()
        self.token: str | None = None

    async def open_progress(self, prefix: str = "trainium-lens") -> str | None:
        """Work-done progress, when the client offers it: its token, and its cancel
        button wired to the run's cancel. None: the run goes on without."""
        caps = self.ls.client_capabilities.window
        if not (caps and caps.work_done_progress):
            return None
        token = f"{prefix}-{uuid.uuid4().hex[:12]}"
        try:
            await self.ls.work_done_progress.create_async(token)
            self.token = token
            future = self.ls.work_done_progress.tokens.get(token)
            if future is not None:  # the user pressed cancel on the progress

                def on_done(f: concurrent.futures.Future) -> None:
                    if f.cancelled():
                        self.cancel.set()

                future.add_done_callback(on_done)
        except Exception as err:  # the client refused a progress token: run without
            log.warning("work done progress unavailable: %s", err)
        return self.token

    def begin(self, message: str | None = None) -> None:
        if self.token is not None:
            self.ls.work_done_progress.begin(
                self.token,
                types.WorkDoneProgressBegin(
                    title=self.title, message=message, cancellable=True, percentage=0
                ),
            )

    def report(self, message: str, percentage: int | None = None) -> None:
        if self.token is not None:
            self.ls.work_done_progress.report(
                self.token,
                types.WorkDoneProgressReport(message=message, percentage=percentage, cancellable=True),
            )

    def end(self, message: str) -> None:
        """The progress ends (once: nothing is reported after)."""
        token, self.token = self.token, None
        if token is not None:
            self.ls.work_done_progress.end(token, types.WorkDoneProgressEnd(message=message))
            self.ls.work_done_progress.tokens.pop(token, None)

    def state(self, state: str, message: str) -> None:
        """``running``, ``ok``, ``cancelled`` or ``error`` on ``RUN_STATE``."""
        if self.host is not None:
            self.ls.protocol.notify(RUN_STATE, {"state": state, "host": self.host, "message": message})

    async def work(self, fn: Callable[[Events], T], on_event: Events) -> T:
        """``fn(events)`` in a worker thread, each event it passes handed to
        ``on_event`` on the event loop. A ``$/cancelRequest`` for the command sets the
        cancel, waits for the work to stop, ends the progress and raises on."""
        loop = asyncio.get_running_loop()

        def events(event: dict) -> None:  # worker thread → event loop
            loop.call_soon_threadsafe(on_event, event)

        future = loop.run_in_executor(None, lambda: fn(events))
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            self.cancel.set()
            try:
                await future
            except Exception:
                pass
            self.end("Cancelled")
            self.state("cancelled", "cancelled")
            raise

    async def failed(self, err: Exception) -> None:
        """The work raised: progress ends saying so (a bug is logged whole)."""
        if not isinstance(err, (LensError, OSError)):
            log.exception("%s failed", self.title, exc_info=err)
        await asyncio.sleep(0)  # let queued progress reports go out before the end
        self.end("Cancelled" if isinstance(err, Cancelled) else f"Failed: {err}")

    def fail(self, failure: Failure, **reply: object) -> dict:
        """Say why in one line, announce it, and the command's reply."""
        self.ls.show(f"Trainium Lens: {failure.message}", failure.level)
        self.state("cancelled" if failure.kind == "cancelled" else "error", failure.message)
        return {**reply, "error": failure.message, "kind": failure.kind}


def clear_errors(ls: LensServer, runs: DocumentRuns) -> None:
    """A new run of ``runs``'s file replaces the errors its last run left."""
    for doc in list(ls.documents.values()):
        if any(origin == runs.file for _, _, origin in doc.errors):
            doc.errors = [e for e in doc.errors if e[2] != runs.file]
            ls.views_changed([doc.uri])


def error_diagnostic(
    ls: LensServer, runs: DocumentRuns, message: str, file: str | None, line: int | None
) -> None:
    """Put an error in the user's code on their line (the file may be another
    one of the workspace: a helper module that raised)."""
    if not line:
        return
    workspace = runs.index.workspace
    target_uri = runs.uri
    if file:
        path = Path(file)
        candidates = [path] if path.is_absolute() else [workspace / path]
        # A remote path: the part after the synced ``src/`` is workspace-relative.
        parts = path.parts
        if "src" in parts:
            candidates.append(workspace.joinpath(*parts[len(parts) - parts[::-1].index("src") :]))
        for candidate in candidates:
            if candidate.is_file():
                target_uri = from_fs_path(str(candidate.resolve())) or runs.uri
                break
    target = ls.document_runs(target_uri) or runs
    target.errors.append((max(0, int(line) - 1), message, runs.file))
    ls.views_changed([target.uri])

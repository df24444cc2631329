"""``trainiumLens.profile``: run a profile from the editor.

The run goes through ``runner.profile`` in a worker thread (targets are
synchronous and cancel through a ``threading.Event``); the harness's stage
events become work-done progress, which the user can cancel (the target then
stops the whole process group, remote included). The command resolves when the
run ends: ``{run_ids, backend, headline}``, or ``{run_ids: [], error, kind}``
after the reason was shown (``window/showMessage``) and, for an error in the
user's code, put on their line as a diagnostic.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.uris import from_fs_path, to_fs_path

from trainium_lens.errors import (
    Cancelled,
    HarnessError,
    LensError,
    NotStored,
    TargetError,
    TimedOut,
    UsageError,
)
from trainium_lens.lsp.features import trust
from trainium_lens.lsp.present import format as fmt

# A runtime import: pygls reads command handlers' annotations (get_type_hints).
from trainium_lens.lsp.runs import DocumentRuns
from trainium_lens.lsp.state import LensServer, Running

log = logging.getLogger(__name__)

COMMAND = "trainiumLens.profile"
RUN_STATE = "trainiumLens/runState"
TITLE = "Profile on Trainium"

# Where each stage sits in the progress bar of one function (percent).
STAGES = {
    "connect": 0,
    "sync": 3,
    "import": 6,
    "inputs": 10,
    "compile": 14,
    "profile": 30,
    "export": 82,
    "timing": 90,
    "done": 98,
}


@dataclass
class Request:
    uri: str
    path: Path
    function: str | None
    line: int | None  # 0-based


def parse_request(args: tuple) -> Request:
    arg = args[0] if len(args) == 1 else None
    if not isinstance(arg, dict) or not isinstance(arg.get("uri"), str):
        raise UsageError(f"{COMMAND} takes one argument {{uri, function?, line?}}")
    uri, function, line = arg["uri"], arg.get("function"), arg.get("line")
    if function is not None and not isinstance(function, str):
        raise UsageError(f"{COMMAND}: function must be a string")
    if line is not None and (isinstance(line, bool) or not isinstance(line, int) or line < 0):
        raise UsageError(f"{COMMAND}: line must be a 0-based line number")
    path_str = to_fs_path(uri) if uri.startswith("file:") else None
    if not path_str:
        raise UsageError(f"only files on disk can be profiled, not {uri}")
    path = Path(path_str)
    if not path.is_file():
        raise UsageError(f"{path.name} is not saved on disk")
    return Request(uri, path.resolve(), function or None, line)


def choose_functions(req: Request, source: str) -> list[str]:
    """The marked functions to run: named, containing ``line``, or all (the
    harness's own rule, ``markers.select``). A name or line that matches nothing
    is the user's request at fault: a ``UsageError``."""
    from trainium_lens.harness.events import HarnessError as SelectError
    from trainium_lens.harness.markers import find_marked, select

    try:
        marked = find_marked(source)
    except SyntaxError as err:
        where = f"{req.path.name}:{err.lineno}" if err.lineno else req.path.name
        raise HarnessError("parse", f"{where}: {err.msg}", file=str(req.path), line=err.lineno) from None
    line = None if req.line is None else req.line + 1
    functions = [req.function] if req.function else []
    try:
        chosen = select(marked, functions, line, req.path.name, source)
    except SelectError as err:
        if err.kind == "unknown_function":
            raise UsageError(err.message) from None
        raise HarnessError(err.kind, err.message, file=str(req.path), line=err.line) from None
    return [m.name for m in chosen]


async def open_progress(ls: LensServer, reporter: Reporter, running: Running) -> None:
    """Work-done progress for a run, when the client offers it: its token on the
    reporter and the run, and its cancel button wired to the run's cancel."""
    caps = ls.client_capabilities.window
    if caps and caps.work_done_progress:
        token = f"trainium-lens-{uuid.uuid4().hex[:12]}"
        try:
            await ls.work_done_progress.create_async(token)
            reporter.token = running.token = token
            future = ls.work_done_progress.tokens.get(token)
            if future is not None:  # the user pressed cancel on the progress

                def on_done(f: concurrent.futures.Future) -> None:
                    if f.cancelled():
                        running.cancel.set()

                future.add_done_callback(on_done)
        except Exception as err:  # the client refused a progress token: run without
            log.warning("work done progress unavailable: %s", err)


class Reporter:
    """Harness events → work-done progress (called on the event loop thread)."""

    def __init__(self, ls: LensServer, token: str | None, functions: list[str], title: str = TITLE):
        self.ls, self.token, self.functions, self.title = ls, token, functions, title
        self.percent = 0
        self.warnings: list[str] = []

    def begin(self, message: str) -> None:
        if self.token is not None:
            self.ls.work_done_progress.begin(
                self.token,
                types.WorkDoneProgressBegin(
                    title=self.title, message=message, cancellable=True, percentage=0
                ),
            )

    def end(self, message: str) -> None:
        if self.token is not None:
            self.ls.work_done_progress.end(self.token, types.WorkDoneProgressEnd(message=message))
            self.ls.work_done_progress.tokens.pop(self.token, None)

    def on_event(self, event: dict) -> None:
        kind = event.get("event")
        if kind == "stage":
            self._stage(event)
        elif kind == "warning":
            message = str(event.get("message", ""))
            self.warnings.append(message)
            self.ls.log_line(f"warning: {message}", types.MessageType.Warning)
        elif kind == "output":
            self.ls.log_line(str(event.get("text", "")).rstrip("\n"))

    def _stage(self, event: dict) -> None:
        stage = str(event.get("stage", ""))
        function = event.get("function")
        message = str(event.get("message") or stage)
        if stage == "profile" and event.get("step") and event.get("of"):
            message = f"profile step {event['step']}/{event['of']}"
        label = f"{function}: {message}" if function else message
        self.ls.log_line(label)
        if self.token is None:
            return
        start = STAGES.get(stage, self.percent)
        if stage == "profile" and event.get("of"):
            start += (
                (STAGES["export"] - STAGES["profile"]) * int(event.get("step", 0)) // max(1, int(event["of"]))
            )
        n = max(1, len(self.functions))
        index = self.functions.index(function) if function in self.functions else 0
        overall = (index * 100 + start) // n if stage not in ("connect", "sync") else start // n
        self.percent = max(self.percent, min(99, overall))  # never goes backwards
        self.ls.work_done_progress.report(
            self.token, types.WorkDoneProgressReport(message=label, percentage=self.percent, cancellable=True)
        )


async def run_profile(ls: LensServer, *args: Any) -> dict:
    if trust.refused(ls):
        return trust.refusal(trust.PROFILE_REFUSED, run_ids=[])
    if ls.settings.rejected:  # a rejected host never falls back to this machine
        message = f"invalid setting {ls.settings.rejected[0]}: fix it to profile (nothing runs meanwhile)"
        ls.show(f"Trainium Lens: {message}", types.MessageType.Error)
        return {"run_ids": [], "error": message, "kind": "settings"}
    try:
        req = parse_request(args)
    except UsageError as err:
        ls.show(f"Trainium Lens: {err}", types.MessageType.Error)
        return {"run_ids": [], "error": str(err), "kind": "usage"}
    runs = ls.document_runs(req.uri)
    if runs is None:
        message = f"{req.path.name} is not inside the workspace"
        ls.show(f"Trainium Lens: {message}", types.MessageType.Error)
        return {"run_ids": [], "error": message, "kind": "usage"}
    key = str(req.path)
    if key in ls.running:
        busy = ls.running[key]
        message = (
            f"{req.path.name} is already being profiled ({', '.join(busy.functions)}): "
            f"wait for it or cancel it first"
        )
        ls.show(f"Trainium Lens: {message}", types.MessageType.Warning)
        return {"run_ids": [], "error": message, "kind": "busy"}
    running = ls.running[key] = Running(runs.file, [])
    try:
        return await _run(ls, req, runs, running)
    finally:
        ls.running.pop(key, None)
        ls.refresh_pulled_views()


async def _run(ls: LensServer, req: Request, runs: DocumentRuns, running: Running) -> dict:
    from trainium_lens.engine.runner import profile
    from trainium_lens.model.job import make_job

    settings = ls.settings
    host = settings.host
    for doc in list(ls.documents.values()):  # this run replaces the last one's error
        if any(origin == runs.file for _, _, origin in doc.errors):
            doc.errors = [e for e in doc.errors if e[2] != runs.file]
            ls.views_changed([doc.uri])
    try:
        from trainium_lens.harness.markers import read_source

        try:
            disk = read_source(req.path)  # a `# coding:` declaration honoured, as the harness does
        except (UnicodeDecodeError, SyntaxError) as err:
            raise UsageError(f"cannot read {req.path.name}: {err}") from None
        open_doc = ls.workspace.text_documents.get(req.uri)
        buffer = open_doc.source if open_doc is not None else disk
        # A line comes from the editor: resolve it in the text the user sees.
        running.functions = choose_functions(req, buffer if req.line is not None else disk)
        if buffer != disk:
            ls.show(
                f"Trainium Lens: {req.path.name} has unsaved changes; profiling the saved file",
                types.MessageType.Warning,
            )
        job = make_job(
            req.path,
            functions=running.functions,
            backend=settings.backend,
            protocol=settings.protocol,
            workspace=runs.index.workspace,
            include=list(settings.include),
            nproc=settings.nproc,
        )
        target = ls.target()
    except Exception as err:  # noqa: BLE001 - every failure becomes a message
        if not isinstance(err, (LensError, OSError)):
            log.exception("preparing the profile failed")
        return _failed(ls, req, runs, err, host)

    reporter = Reporter(ls, None, running.functions)
    await open_progress(ls, reporter, running)
    names = ", ".join(running.functions)
    reporter.begin(f"{runs.file}: {names} on {host}")
    run_state(ls, "running", host, f"profiling {names}")
    ls.views_changed([req.uri], refresh=True)  # code lens: "profiling..."

    loop = asyncio.get_running_loop()

    def on_event(event: dict) -> None:  # worker thread → event loop
        loop.call_soon_threadsafe(reporter.on_event, event)

    work = loop.run_in_executor(
        None,
        lambda: profile(job, target, on_event, running.cancel, settings.timeout_seconds, runs.index.store),
    )
    try:
        results = await asyncio.shield(work)
    except NotStored as err:  # the run finished: show it, say why it is not kept
        results = err.results
        ls.show(f"Trainium Lens: {err}; the results are shown but not kept", types.MessageType.Warning)
    except asyncio.CancelledError:  # $/cancelRequest for the command itself
        running.cancel.set()
        try:
            await work
        except Exception:
            pass
        reporter.end("Cancelled")
        run_state(ls, "cancelled", host, "cancelled")
        raise
    except (LensError, OSError) as err:
        await asyncio.sleep(0)  # let queued progress reports go out before the end
        reporter.end("Cancelled" if isinstance(err, Cancelled) else f"Failed: {err}")
        return _failed(ls, req, runs, err, host)
    except Exception as err:  # a bug: say so, keep serving
        log.exception("profile failed")
        reporter.end(f"Failed: {err}")
        return _failed(ls, req, runs, err, host)

    await asyncio.sleep(0)
    runs.index.add(results)
    headline = " | ".join(
        (f"{r.function.name}: " if len(results) > 1 else "") + fmt.headline(r) for r in results
    )
    reporter.end(headline)
    run_state(ls, "ok", host, headline)
    ls.views_changed(refresh=True)
    return {"run_ids": [r.run_id for r in results], "backend": results[0].backend, "headline": headline}


def _failed(ls: LensServer, req: Request, runs: DocumentRuns, err: Exception, host: str) -> dict:
    """Say why in one line, put a user-code error on its line, resolve the command."""
    error, info = types.MessageType.Error, types.MessageType.Info
    if isinstance(err, Cancelled):
        message, kind, level = "profile cancelled; earlier results kept", "cancelled", info
    elif isinstance(err, TimedOut):
        message, kind, level = f"profile timed out: {err}", "timeout", error
    elif isinstance(err, TargetError):
        message, kind, level = f"cannot run on {host}: {err}", "target", error
    elif isinstance(err, HarnessError):
        message, kind, level = f"profiling {req.path.name} failed: {err}", err.kind, error
        _error_diagnostic(ls, runs, err)
    elif isinstance(err, LensError):
        message, kind, level = str(err), "usage", error
    elif isinstance(err, OSError):
        message, kind, level = f"{req.path.name}: {err.strerror or err}", "usage", error
    else:
        message, kind, level = f"internal error: {type(err).__name__}: {err}", "internal", error
    ls.show(f"Trainium Lens: {message}", level)
    run_state(ls, "cancelled" if kind == "cancelled" else "error", host, message)
    return {"run_ids": [], "error": message, "kind": kind}


def _error_diagnostic(ls: LensServer, runs: DocumentRuns, err: HarnessError) -> None:
    error_diagnostic(ls, runs, str(err), err.file, err.line)


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


def run_state(ls: LensServer, state: str, host: str, message: str) -> None:
    ls.protocol.notify(RUN_STATE, {"state": state, "host": host, "message": message})


def register(server: LensServer) -> None:
    @server.command(COMMAND)
    async def profile_command(ls: LensServer, *args: Any) -> dict:
        return await run_profile(ls, *args)

    def stop_runs(ls: LensServer) -> None:
        for running in list(ls.running.values()):
            running.cancel.set()

    server.on_shutdown.append(stop_runs)

"""``trainiumLens.profile``: run a profile from the editor.

The run goes through ``runner.profile`` in a worker thread (targets are
synchronous and cancel through a ``threading.Event``); the harness's stage
events become work-done progress, which the user can cancel (the target then
stops the whole process group, remote included). The command resolves when the
run ends: ``{run_ids, backend, headline}``, or ``{run_ids: [], error, kind}``
after the reason was shown (``window/showMessage``) and, for an error in the
user's code, put on their line as a diagnostic. That life (progress, cancel,
failure) is ``lsp/long_run.py``'s, shared with the script and fix commands.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.uris import to_fs_path

from trainium_lens.errors import HarnessError, LensError, NotStored, UsageError
from trainium_lens.lsp import command_ids, workspace_trust
from trainium_lens.lsp.harness_progress import Reporter
from trainium_lens.lsp.long_run import Failure, LongRun, clear_errors, describe, error_diagnostic, refuse
from trainium_lens.lsp.present import format as fmt

# A runtime import: pygls reads command handlers' annotations (get_type_hints).
from trainium_lens.lsp.runs import DocumentRuns
from trainium_lens.lsp.state import LensServer, Running

log = logging.getLogger(__name__)

COMMAND = command_ids.PROFILE
TITLE = "Profile on Trainium"


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


async def run_profile(ls: LensServer, *args: Any) -> dict:
    if workspace_trust.refused(ls):
        return workspace_trust.refusal(workspace_trust.PROFILE_REFUSED, run_ids=[])
    if ls.settings.rejected:  # a rejected host never falls back to this machine
        message = f"invalid setting {ls.settings.rejected[0]}: fix it to profile (nothing runs meanwhile)"
        return refuse(ls, message, "settings", run_ids=[])
    try:
        req = parse_request(args)
    except UsageError as err:
        return refuse(ls, str(err), "usage", run_ids=[])
    runs = ls.document_runs(req.uri)
    if runs is None:
        return refuse(ls, f"{req.path.name} is not inside the workspace", "usage", run_ids=[])
    key = str(req.path)
    if key in ls.running:
        busy = ls.running[key]
        message = (
            f"{req.path.name} is already being profiled ({', '.join(busy.functions)}): "
            f"wait for it or cancel it first"
        )
        return refuse(ls, message, "busy", run_ids=[])
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
    run = LongRun(ls, TITLE, running.cancel, host)
    clear_errors(ls, runs)  # this run replaces the last one's error
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
        return run.fail(_failure(ls, req, runs, err, host), run_ids=[])

    reporter = Reporter(run, running.functions)
    running.token = await run.open_progress()
    names = ", ".join(running.functions)
    run.begin(f"{runs.file}: {names} on {host}")
    run.state("running", f"profiling {names}")
    ls.views_changed([req.uri], refresh=True)  # code lens: "profiling..."

    try:
        results = await run.work(
            lambda events: profile(
                job, target, events, running.cancel, settings.timeout_seconds, runs.index.store
            ),
            reporter.on_event,
        )
    except NotStored as err:  # the run finished: show it, say why it is not kept
        results = err.results
        ls.show(f"Trainium Lens: {err}; the results are shown but not kept", types.MessageType.Warning)
    except Exception as err:  # every failure becomes one line; a bug is logged, the server serves on
        await run.failed(err)
        return run.fail(_failure(ls, req, runs, err, host), run_ids=[])

    await asyncio.sleep(0)
    runs.index.add(results)
    headline = " | ".join(
        (f"{r.function.name}: " if len(results) > 1 else "") + fmt.headline(r) for r in results
    )
    run.end(headline)
    run.state("ok", headline)
    ls.views_changed(refresh=True)
    return {"run_ids": [r.run_id for r in results], "backend": results[0].backend, "headline": headline}


def _failure(ls: LensServer, req: Request, runs: DocumentRuns, err: Exception, host: str) -> Failure:
    """Why, in one line; an error in the user's code also on its line."""
    if isinstance(err, HarnessError):
        error_diagnostic(ls, runs, str(err), err.file, err.line)
        return Failure(f"profiling {req.path.name} failed: {err}", err.kind)
    return describe(
        err,
        cancelled="profile cancelled; earlier results kept",
        timed_out="profile timed out",
        target=f"cannot run on {host}",
        file=req.path.name,
    )


def register(server: LensServer) -> None:
    @server.command(COMMAND)
    async def profile_command(ls: LensServer, *args: Any) -> dict:
        return await run_profile(ls, *args)

    def stop_runs(ls: LensServer) -> None:
        for running in list(ls.running.values()):
            running.cancel.set()

    server.on_shutdown.append(stop_runs)

"""``trainiumLens.runScript``: ``trainium-lens run -- python SCRIPT ARGS`` from the editor.

The client's *Profile Script…* command (and the code lens on the script's
``if __name__ == "__main__":`` line) sends ``{uri, args?, env?, cwd?}``: the
args, env and cwd of a launch.json configuration that names the file, when one
does. Without ``args`` the ``trainiumLens.script.args`` setting gives them. The
command is the interpreter the settings name (else this server's) on the saved
file, run as ``engine.script.run`` runs it for the CLI; the script's stage and
step events become work-done progress (cancellable: the command's process group
is stopped), a failure is one line (and, for a raise, a diagnostic on its line),
and the result is stored in the workspace, so the hints show on every file the
steps ran through (the model module as much as the script). With
``trainiumLens.host`` an SSH host, the command runs there as ``run --host`` runs
it. The script's output goes to the log (this server's stdout is the protocol's).
"""

from __future__ import annotations

import asyncio
import logging
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.uris import to_fs_path

from trainium_lens.errors import Cancelled, LensError, NotStored, TargetError, TimedOut, UsageError
from trainium_lens.lsp.features import trust
from trainium_lens.lsp.features.profile import Reporter, error_diagnostic, open_progress, run_state
from trainium_lens.lsp.present import format as fmt
from trainium_lens.lsp.runs import DocumentRuns
from trainium_lens.lsp.state import LensServer, Running
from trainium_lens.model.result import Result

log = logging.getLogger(__name__)

COMMAND = "trainiumLens.runScript"
TITLE = "Profile Script on Trainium"
SCRIPT = "script"  # what ``Running.functions`` names while a script runs (the code lens reads it)


@dataclass
class ScriptArgs:
    uri: str
    path: Path
    args: list[str] | None  # None: the setting's
    env: dict[str, str]
    cwd: Path | None


def parse_args(args: tuple) -> ScriptArgs:
    arg = args[0] if len(args) == 1 else None
    if not isinstance(arg, dict) or not isinstance(arg.get("uri"), str):
        raise UsageError(f"{COMMAND} takes one argument {{uri, args?, env?, cwd?}}")
    argv, env, cwd = arg.get("args"), arg.get("env") or {}, arg.get("cwd")
    if argv is not None and (not isinstance(argv, list) or not all(isinstance(a, str) for a in argv)):
        raise UsageError(f"{COMMAND}: args must be a list of strings")
    if not isinstance(env, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in env.items()
    ):
        raise UsageError(f"{COMMAND}: env must map names to strings")
    if cwd is not None and not isinstance(cwd, str):
        raise UsageError(f"{COMMAND}: cwd must be a folder path")
    uri = arg["uri"]
    path_str = to_fs_path(uri) if uri.startswith("file:") else None
    if not path_str:
        raise UsageError(f"only files on disk can be run, not {uri}")
    path = Path(path_str)
    if not path.is_file():
        raise UsageError(f"{path.name} is not saved on disk")
    folder = Path(cwd).expanduser() if cwd else None
    if folder is not None and not folder.is_dir():
        raise UsageError(f"the configuration's cwd {cwd} is not a folder")
    return ScriptArgs(uri, path.resolve(), argv, dict(env), folder)


def main_line(source: str) -> int | None:
    """The 1-based ``if __name__ == "__main__":`` line, None without one (or mid-edit)."""
    import ast

    from trainium_lens.model.script import main_guard_line

    try:
        return main_guard_line(ast.parse(source))
    except (SyntaxError, ValueError):
        return None


class ScriptReporter(Reporter):
    """The harness's events from the script's processes: rank 0 (or the only one) speaks."""

    def on_event(self, event: dict) -> None:
        if event.get("rank") not in (None, 0) and event.get("event") != "warning":
            return
        kind = event.get("event")
        if kind == "detector":
            event = {
                "event": "stage",
                "stage": "import",
                "message": f"steps found by the {event.get('name')} hooks",
            }
        elif kind == "result":
            event = {"event": "stage", "stage": "done", "message": "profile written; the script runs on"}
        super().on_event(event)


async def run_script_command(ls: LensServer, *args: Any) -> dict:
    if trust.refused(ls):  # the client shows the server's words (trust.refusal)
        return trust.refusal(trust.PROFILE_REFUSED, run_ids=[])
    if ls.settings.rejected:  # a rejected host never falls back to this machine
        return _refused(ls, f"invalid setting {ls.settings.rejected[0]}: fix it to profile", "settings")
    try:
        req = parse_args(args)
    except UsageError as err:
        return _refused(ls, str(err), "usage")
    runs = ls.document_runs(req.uri)
    if runs is None:
        return _refused(ls, f"{req.path.name} is not inside the workspace", "usage")
    key = str(req.path)
    if key in ls.running:
        message = f"{req.path.name} is already being profiled: wait for it or cancel it first"
        ls.show(f"Trainium Lens: {message}", types.MessageType.Warning)
        return {"run_ids": [], "error": message, "kind": "busy"}
    running = ls.running[key] = Running(runs.file, [SCRIPT])
    try:
        return await _run(ls, req, runs, running)
    finally:
        ls.running.pop(key, None)
        ls.refresh_pulled_views()


async def _run(ls: LensServer, req: ScriptArgs, runs: DocumentRuns, running: Running) -> dict:
    from trainium_lens.engine import script as engine
    from trainium_lens.model.script import parse_command

    settings = ls.settings
    for doc in list(ls.documents.values()):  # this run replaces the last one's error
        if any(origin == runs.file for _, _, origin in doc.errors):
            doc.errors = [e for e in doc.errors if e[2] != runs.file]
            ls.views_changed([doc.uri])
    workspace = runs.index.workspace
    cwd = req.cwd or workspace
    argv = [
        settings.python or sys.executable,
        str(req.path),
        *(settings.script_args if req.args is None else req.args),
    ]
    try:
        request = engine.ScriptRequest(
            command=parse_command(argv, cwd),
            cwd=cwd,
            backend=settings.backend,
            include=tuple(settings.include),
            workspace=workspace,
            env=req.env,
            capture=True,  # our stdout is the protocol's channel: the script's output goes to the log
        )
    except LensError as err:
        return _refused(ls, str(err), "usage")

    reporter = ScriptReporter(ls, None, [], TITLE)
    await open_progress(ls, reporter, running)
    shown = " ".join([Path(argv[0]).name, runs.file, *argv[2:]])
    reporter.begin(f"{shown} (steps {request.steps[0]}-{request.steps[1]})")
    run_state(ls, "running", settings.host, f"running {shown}")
    ls.views_changed([req.uri], refresh=True)  # code lens: "profiling..."

    loop = asyncio.get_running_loop()

    def on_event(event: dict) -> None:  # worker thread → event loop
        loop.call_soon_threadsafe(reporter.on_event, event)

    def run_there() -> tuple[list[Result], int]:  # a target of its own, closed after the run
        from trainium_lens.targets.make import make_target

        target = make_target(settings.where())
        try:
            return engine.run(
                request, target, on_event, running.cancel, settings.timeout_seconds, runs.index.store
            )
        finally:
            target.close()

    work = loop.run_in_executor(None, run_there)
    try:
        results, code = await asyncio.shield(work)
    except NotStored as err:
        results, code = err.results, 0
        ls.show(f"Trainium Lens: {err}; the results are shown but not kept", types.MessageType.Warning)
    except asyncio.CancelledError:  # $/cancelRequest for the command itself
        running.cancel.set()
        try:
            await work
        except Exception:
            pass
        reporter.end("Cancelled")
        run_state(ls, "cancelled", settings.host, "cancelled")
        raise
    except Exception as err:  # every failure becomes one line
        await asyncio.sleep(0)  # let queued progress reports go out before the end
        if not isinstance(err, (LensError, OSError)):
            log.exception("run script failed")
        reporter.end("Cancelled" if isinstance(err, Cancelled) else f"Failed: {err}")
        return _failed(ls, req, runs, err)

    await asyncio.sleep(0)
    runs.index.add(results)
    headline = fmt.headline(results[0])
    if code:
        headline += f" (the script exited with status {code})"
    reporter.end(headline)
    run_state(ls, "ok", settings.host, headline)
    ls.views_changed(refresh=True)
    return {
        "run_ids": [r.run_id for r in results],
        "backend": results[0].backend,
        "headline": headline,
        "exit_status": code,
    }


def _refused(ls: LensServer, message: str, kind: str) -> dict:
    ls.show(f"Trainium Lens: {message}", types.MessageType.Error)
    return {"run_ids": [], "error": message, "kind": kind}


def _failed(ls: LensServer, req: ScriptArgs, runs: DocumentRuns, err: Exception) -> dict:
    from trainium_lens.engine.script import ScriptFailed

    error, level = types.MessageType.Error, types.MessageType.Error
    if isinstance(err, Cancelled):
        message, kind, level = (
            "run cancelled: the script was stopped; earlier results kept",
            "cancelled",
            types.MessageType.Info,
        )
    elif isinstance(err, TimedOut):
        message, kind = f"run timed out: {err}", "timeout"
    elif isinstance(err, ScriptFailed):
        message, kind = " ".join(str(err).split()), "script"
        error_diagnostic(ls, runs, message, err.file, err.line)
    elif isinstance(err, TargetError):
        message, kind = f"cannot run {req.path.name}: {err}", "target"
    elif isinstance(err, LensError):
        message, kind = str(err), "usage"
    elif isinstance(err, OSError):
        message, kind = f"{req.path.name}: {err.strerror or err}", "usage"
    else:
        message, kind = f"internal error: {type(err).__name__}: {err}", "internal"
    ls.show(f"Trainium Lens: {message}", level if kind == "cancelled" else error)
    run_state(ls, "cancelled" if kind == "cancelled" else "error", ls.settings.host, message)
    return {"run_ids": [], "error": message, "kind": kind}


def register(server: LensServer) -> None:
    @server.command(COMMAND)
    async def run_script(ls: LensServer, *args: Any) -> dict:
        return await run_script_command(ls, *args)

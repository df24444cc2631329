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

from trainium_lens.errors import LensError, NotStored, UsageError
from trainium_lens.lsp import command_ids, workspace_trust
from trainium_lens.lsp.harness_progress import Reporter
from trainium_lens.lsp.long_run import Failure, LongRun, clear_errors, describe, error_diagnostic, refuse
from trainium_lens.lsp.present import format as fmt
from trainium_lens.lsp.runs import DocumentRuns
from trainium_lens.lsp.state import SCRIPT, LensServer, Running
from trainium_lens.model.result import Result
from trainium_lens.targets.base import EventSink

log = logging.getLogger(__name__)

COMMAND = command_ids.RUN_SCRIPT
TITLE = "Profile Script on Trainium"


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
    if workspace_trust.refused(ls):  # the client shows the server's words (workspace_trust.refusal)
        return workspace_trust.refusal(workspace_trust.PROFILE_REFUSED, run_ids=[])
    if ls.settings.rejected:  # a rejected host never falls back to this machine
        return refuse(
            ls, f"invalid setting {ls.settings.rejected[0]}: fix it to profile", "settings", run_ids=[]
        )
    try:
        req = parse_args(args)
    except UsageError as err:
        return refuse(ls, str(err), "usage", run_ids=[])
    runs = ls.document_runs(req.uri)
    if runs is None:
        return refuse(ls, f"{req.path.name} is not inside the workspace", "usage", run_ids=[])
    key = str(req.path)
    if key in ls.running:
        message = f"{req.path.name} is already being profiled: wait for it or cancel it first"
        return refuse(ls, message, "busy", run_ids=[])
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
    clear_errors(ls, runs)  # this run replaces the last one's error
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
        return refuse(ls, str(err), "usage", run_ids=[])

    run = LongRun(ls, TITLE, running.cancel, settings.host)
    reporter = ScriptReporter(run, [])
    running.token = await run.open_progress()
    shown = " ".join([Path(argv[0]).name, runs.file, *argv[2:]])
    run.begin(f"{shown} (steps {request.steps[0]}-{request.steps[1]})")
    run.state("running", f"running {shown}")
    ls.views_changed([req.uri], refresh=True)  # code lens: "profiling..."

    def run_there(events: EventSink) -> tuple[list[Result], int]:  # a target of its own, closed after
        from trainium_lens.targets.make import make_target

        target = make_target(settings.where())
        try:
            return engine.run(
                request, target, events, running.cancel, settings.timeout_seconds, runs.index.store
            )
        finally:
            target.close()

    try:
        results, code = await run.work(run_there, reporter.on_event)
    except NotStored as err:
        results, code = err.results, 0
        ls.show(f"Trainium Lens: {err}; the results are shown but not kept", types.MessageType.Warning)
    except Exception as err:  # every failure becomes one line
        await run.failed(err)
        return run.fail(_failure(ls, req, runs, err), run_ids=[])

    await asyncio.sleep(0)
    runs.index.add(results)
    headline = fmt.headline(results[0])
    if code:
        headline += f" (the script exited with status {code})"
    run.end(headline)
    run.state("ok", headline)
    ls.views_changed(refresh=True)
    return {
        "run_ids": [r.run_id for r in results],
        "backend": results[0].backend,
        "headline": headline,
        "exit_status": code,
    }


def _failure(ls: LensServer, req: ScriptArgs, runs: DocumentRuns, err: Exception) -> Failure:
    """Why, in one line; a raise in the script also on its line."""
    from trainium_lens.engine.script import ScriptFailed

    if isinstance(err, ScriptFailed):
        message = " ".join(str(err).split())
        error_diagnostic(ls, runs, message, err.file, err.line)
        return Failure(message, "script")
    return describe(
        err,
        cancelled="run cancelled: the script was stopped; earlier results kept",
        timed_out="run timed out",
        target=f"cannot run {req.path.name}",
        file=req.path.name,
    )


def register(server: LensServer) -> None:
    @server.command(COMMAND)
    async def run_script(ls: LensServer, *args: Any) -> dict:
        return await run_script_command(ls, *args)

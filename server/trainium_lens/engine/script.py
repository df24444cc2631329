"""One ``trainium-lens run`` end to end: the user's command with the harness
injected → the result of its steps N..M → analysis → store.

The CLI and the language server call ``run``; what went wrong is said in one
line (``ScriptFailed``) with the script's own exit status kept beside it.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from pathlib import Path

from trainium_lens.engine.finish import finish, run_folder_removed_on_failure
from trainium_lens.engine.provenance import git_state
from trainium_lens.engine.script_exit import launcher_note
from trainium_lens.errors import LensError, TargetError
from trainium_lens.harness.spec import ScriptSpec
from trainium_lens.model import figures
from trainium_lens.model.job import new_batch_id, workspace_root_for
from trainium_lens.model.result import Result
from trainium_lens.model.script import ScriptCommand
from trainium_lens.model.store import RunStore
from trainium_lens.targets.base import EventSink, Target
from trainium_lens.targets.outcome import Outcome, slurm_ended


class ScriptFailed(LensError):
    """No result: why, in one line; ``returncode`` is the script's own status."""

    def __init__(self, message: str, returncode: int = 1, file: str | None = None, line: int | None = None):
        super().__init__(message)
        self.returncode, self.file, self.line = returncode, file, line


@dataclass
class ScriptRequest:
    command: ScriptCommand
    cwd: Path
    steps: tuple[int, int] = (3, 5)
    exit_after: bool = False
    backend: str = "auto"
    include: tuple[str, ...] = ()
    step_on: str | None = None
    workspace: Path | None = None
    env: dict[str, str] | None = None
    capture: bool = False  # the command's output as ``output`` events, not on our stdout/stderr

    def root(self) -> Path:
        if self.workspace is not None:
            return self.workspace.resolve()
        anchor = self.command.script or (self.cwd / "x")
        root = workspace_root_for(anchor)
        cwd = self.cwd.resolve()
        if root == anchor.parent.resolve() and cwd in anchor.resolve().parents:
            return cwd  # outside git: the folder the command runs in, when the script is below it
        return root


def run(
    req: ScriptRequest,
    target: Target,
    on_event: EventSink | None = None,
    cancel: threading.Event | None = None,
    timeout: float | None = None,
    store: RunStore | None = None,
) -> tuple[list[Result], int]:
    """The results (one: ranks merged) and the script's exit status, the command run
    where ``target`` runs it (the caller's: it picks the run folder, and closes it). A
    run that failed, was stopped or is not stored leaves no run folder (``finish.py``)."""
    root = req.root()
    batch_id = new_batch_id()
    spec = script_spec(req, root, batch_id, target.host)
    git = git_state(root, spec.script_rel)
    sink = on_event or (lambda _e: None)
    with run_folder_removed_on_failure(target, root, batch_id):
        outcome = target.run_script(
            req.command,
            spec,
            sink,
            workspace=root,
            cwd=req.cwd,
            env=req.env,
            cancel=cancel,
            timeout=timeout,
            capture=req.capture,  # the language server's stdout is its protocol channel
        )
        if not outcome.results:
            raise explain(outcome, req)
        note = launcher_note(outcome)
        if note is not None:
            sink({"event": "warning", "message": note})
        results = finish(
            _document(outcome),
            target=target,
            workspace=root,
            batch_id=batch_id,
            git=git,
            store=store,
            device_lines=False,  # as before: a script's Neuron views are not read into its lines
            source=None,  # no edits: ``fix`` measures one by running a marked function
            unstored="remove",  # the caller has the results; their traces go with the run
        )
    # srun may exit 0 when SLURM ended its job (script_exit.launcher_note): no success
    return results, outcome.returncode or (1 if slurm_ended(outcome.events) else 0)


def script_spec(req: ScriptRequest, root: Path, batch_id: str, host: str) -> ScriptSpec:
    """What the harness armed in the command's processes is asked (docs/protocol.md);
    its run folder is the target's choice (``Target.run_script``)."""
    script = req.command.script
    rel = None
    if script is not None:
        try:
            rel = script.resolve().relative_to(root).as_posix()
        except ValueError:
            rel = script.name
    return ScriptSpec(
        batch_id=batch_id,
        workspace_root=str(root),
        run_dir="",
        command=tuple(req.command.argv),
        launcher=req.command.launcher,
        wrapper=req.command.wrapper,
        script_rel=rel,
        main_line=req.command.main_line(),
        steps=req.steps,
        exit_after=req.exit_after,
        backend=req.backend,
        include=tuple(req.include),
        step_on=req.step_on,
        host=host,
    )


def _document(outcome: Outcome) -> dict:
    batches = []
    for path in outcome.results:
        if path in outcome.documents:
            batches.append(outcome.documents[path])
            continue
        try:
            batches.append(json.loads(Path(path).read_text(encoding="utf-8")))
        except (OSError, ValueError) as exc:
            raise TargetError(f"cannot read the harness result {path}: {exc}") from None
    said = [e for e in outcome.events if e.get("event") == "result" and isinstance(e.get("path"), str)]
    if len(batches) == 1 and said[0].get("rank") is None:
        return batches[0]
    # ranks on several nodes (srun): each names its node, node rank and local rank
    across = len({e.get("node") for e in said}) > 1
    return {
        "schema_version": batches[0].get("schema_version", 1),
        "batch_id": batches[0].get("batch_id", ""),
        "results": batches[0].get("results", []),
        "rank_batches": [
            {
                "rank": int(e.get("rank") or 0),
                "run_dir": str(Path(p).parent),
                "batch": b,
                **({k: e[k] for k in ("node", "node_rank", "local_rank") if k in e} if across else {}),
            }
            for e, p, b in zip(said, outcome.results, batches, strict=True)
        ],
    }


def explain(outcome: Outcome, req: ScriptRequest) -> ScriptFailed:
    """Why a finished command left no result, in one line."""
    code = outcome.returncode
    status = f"exit status {code}"
    by_kind: dict[str, dict] = {}
    for event in outcome.events:
        by_kind.setdefault(str(event.get("event")), event)
    by_slurm = slurm_ended(outcome.events)
    if by_slurm is not None:  # under srun, SLURM stopped the ranks: not the script's doing
        ranks = any(e.get("event") == "hello" and e.get("role") in ("main", "worker") for e in outcome.events)
        when = (
            f"before the window (steps {req.steps[0]}:{req.steps[1]}) was complete"
            if ranks
            else "before any rank ran the script"
        )
        return ScriptFailed(f"{by_slurm}, {when} ({status} from srun; nothing stored)", code or 1)
    if "aside" in by_kind:
        return ScriptFailed(f"not profiled: {by_kind['aside'].get('why')} ({status}; nothing stored)", code)
    if "raised" in by_kind:
        e = by_kind["raised"]
        where = f"{e.get('file')}:{e.get('line')}: " if e.get("file") else ""
        made = figures.plural(int(e.get("steps") or 0), "step")
        return ScriptFailed(
            f"{where}the script raised {e.get('message')} after {made}, before the "
            f"window (steps {req.steps[0]}:{req.steps[1]}) was complete ({status}; nothing stored)",
            code or 1,
            e.get("file"),
            e.get("line"),
        )
    if "error" in by_kind:
        return ScriptFailed(f"{by_kind['error'].get('message')} ({status}; nothing stored)", code or 1)
    armed = by_kind.get("armed")
    if armed is None and "launcher_error" in by_kind:
        e = by_kind["launcher_error"]
        return ScriptFailed(
            f"torchrun's agent on {e.get('node')} raised {e.get('type')}: {e.get('message')} before any rank "
            f"ran the script ({status}; nothing stored)",
            code or 1,
        )
    if armed is None:
        return ScriptFailed(
            f"the script ended ({status}) before it imported torch: nothing to profile, nothing stored", code
        )
    exits = [e for e in outcome.events if e.get("event") == "exit"]
    steps = min((int(e.get("steps") or 0) for e in exits), default=0)
    need = int((armed.get("window") or [0, req.steps[1]])[1])
    if steps == 0:
        tried = ", ".join(armed.get("tried") or [])
        return ScriptFailed(
            f"the script never made a step (tried: {tried}); name its step with --step-on FILE:LINE "
            f"or --step-on module.function ({status}; nothing stored)",
            code,
        )
    twins = "" if need == req.steps[1] else " (each measured step with its unlabelled twin on the cpu clock)"
    detector = by_kind.get("detector", {}).get("name", "optimizer")
    return ScriptFailed(
        f"the script ran {figures.plural(steps, detector + ' step')}; "
        f"--steps {req.steps[0]}:{req.steps[1]} needs {need}{twins} ({status}; nothing stored)",
        code,
    )

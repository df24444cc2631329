"""Run the harness on this machine, in a Python that has torch.

The workspace is used in place (nothing is synced); the harness is imported
from this package's own folder through ``PYTHONPATH``, so the target Python
needs torch but not trainium-lens. Run directories live under
``$TRAINIUM_LENS_CACHE`` (default ``~/.cache/trainium-lens``), the same layout
a remote host uses: ``<workspace-id>/runs/<batch_id>/``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from trainium_lens.errors import TargetError
from trainium_lens.harness.spec import ScriptSpec
from trainium_lens.model.job import Job, workspace_id
from trainium_lens.model.paths import is_run_id
from trainium_lens.model.script import ScriptCommand
from trainium_lens.targets import script
from trainium_lens.targets.base import EventSink, Target
from trainium_lens.targets.outcome import Outcome
from trainium_lens.targets.stream import PACKAGE_PARENT, run_harness_process

if TYPE_CHECKING:
    from trainium_lens.targets.warm.slot import WarmSlot


def cache_root() -> Path:
    override = os.environ.get("TRAINIUM_LENS_CACHE")
    if override:
        return Path(override).expanduser()
    return Path.home() / ".cache" / "trainium-lens"


def read_json_file(path: str) -> dict:
    """The local ``read_result``: the batch document the harness wrote."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except OSError as exc:
        raise TargetError(f"cannot read the harness result {path}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise TargetError(f"the harness result {path} is not valid JSON: {exc.msg}") from None
    if not isinstance(data, dict):
        raise TargetError(f"the harness result {path} is not a JSON object")
    return data


class LocalTarget(Target):
    host = "local"

    def __init__(self, python: str | None = None) -> None:
        self.python = python or sys.executable
        #: A ``warm.WarmSlot`` when runs should use a warm worker (the language
        #: server sets one; the CLI stays cold).
        self.warm: WarmSlot | None = None

    def _python_path(self) -> str:
        """The interpreter to run, resolved; a clear error when there is none."""
        candidate = os.path.expanduser(self.python)
        if os.sep not in candidate:
            found = shutil.which(candidate)
            if found:
                return found
            raise TargetError(f"python not found: {self.python} (not on PATH)")
        if not os.path.isfile(candidate):
            raise TargetError(f"python not found: {self.python}")
        if not os.access(candidate, os.X_OK):
            raise TargetError(f"python is not executable: {self.python}")
        return candidate

    def run_dir(self, job: Job) -> Path:
        return cache_root() / workspace_id(job.workspace) / "runs" / job.batch_id

    def run(
        self,
        job: Job,
        on_event: EventSink,
        cancel: threading.Event | None = None,
        timeout: float | None = None,
    ) -> dict:
        python = self._python_path()
        run_dir = self.run_dir(job)
        spec = job.to_spec(str(job.workspace), str(run_dir), self.host)
        env = dict(os.environ)
        # Ours first, so the harness matches this server; the user's entries
        # stay (their code may need them).
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PACKAGE_PARENT), env.get("PYTHONPATH", "")) if p)
        env.setdefault("PYTHONUNBUFFERED", "1")
        if self.warm is not None and self.warm.takes(job):
            from trainium_lens.targets.warm.worker import Launch

            launch = Launch(
                [python, "-m", "trainium_lens.harness.runtime.worker", "--idle", f"{self.warm.idle_s:g}"],
                key=(python, str(PACKAGE_PARENT), self.warm.idle_s),
                env=env,
            )
            return self.warm.run(launch, spec, on_event, cancel, timeout, read_result=read_json_file)
        return run_harness_process(
            [python, "-m", "trainium_lens.harness"],
            spec,
            on_event,
            cancel,
            timeout,
            read_result=read_json_file,
            env=env,
            cwd=job.workspace,
        )

    def run_script(
        self,
        command: ScriptCommand,
        spec: ScriptSpec,
        on_event: EventSink,
        *,
        workspace: Path,
        cwd: Path,
        env: dict[str, str] | None = None,
        cancel: threading.Event | None = None,
        timeout: float | None = None,
        capture: bool = False,
    ) -> Outcome:
        """The command here, in its own session (``script.py``); its run folder is a
        profile's: ``<cache>/<workspace id>/runs/<batch_id>``."""
        run_dir = cache_root() / workspace_id(workspace) / "runs" / spec.batch_id
        spec = dataclasses.replace(spec, run_dir=str(run_dir))
        return script.run_script(command.argv, cwd, spec, run_dir, on_event, cancel, timeout, env, capture)

    def remove_runs(self, workspace: Path, batch_ids: list[str]) -> None:
        root = cache_root() / workspace_id(workspace) / "runs"
        for batch_id in batch_ids:
            if not is_run_id(batch_id):
                continue
            folder = root / batch_id
            # only a real folder directly in the runs folder (a link is removed, not followed)
            if folder.is_symlink():
                folder.unlink(missing_ok=True)
            elif folder.is_dir() and folder.resolve().parent == root.resolve():
                shutil.rmtree(folder, ignore_errors=True)

    def close(self) -> None:
        if self.warm is not None:
            self.warm.close()

    def fetch(self, remote_path: str, dest: Path, *, workspace: Path) -> Path:
        """Artifacts are already here: copy them to ``dest`` (a file or folder),
        which must not exist (as for SSH: nothing is replaced). Only what lies in
        a run folder of ``workspace`` (``<cache>/<workspace id>/runs/<batch>``,
        resolved) is copied."""
        runs = (cache_root() / workspace_id(workspace) / "runs").resolve()
        source = Path(remote_path).resolve()
        try:
            inside = source.relative_to(runs).parts
        except ValueError:
            inside = ()
        if not inside or not all(is_run_id(p) for p in inside):
            raise TargetError(f"{remote_path} is not in a run folder of this workspace: not copied")
        if not source.exists():
            raise TargetError(f"no such artifact: {remote_path}")
        dest = Path(dest)
        if source == dest.resolve():
            return dest
        if dest.exists() or dest.is_symlink():
            raise TargetError(f"{dest} already exists: not replaced (remove it to fetch again)")
        dest.parent.mkdir(parents=True, exist_ok=True)
        try:
            if source.is_dir():
                shutil.copytree(source, dest, symlinks=True)
            else:
                shutil.copy2(source, dest)
        except OSError as exc:  # a full disk, a file gone meanwhile: no partial copy stays
            remove_partial(dest)
            raise TargetError(f"cannot copy {remote_path} to {dest}: {exc.strerror or exc}") from None
        return dest


def remove_partial(dest: Path) -> None:
    """What a failed copy left at ``dest`` (a link is removed, not followed)."""
    if dest.is_symlink() or dest.is_file():
        dest.unlink(missing_ok=True)
    elif dest.is_dir():
        shutil.rmtree(dest, ignore_errors=True)

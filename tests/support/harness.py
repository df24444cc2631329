"""Run the harness exactly as a target runs it (``python -m trainium_lens.harness``
with the spec on stdin), stand in for a target that ran it elsewhere, and find
lines in fixtures without hard-coding them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

from tests.conftest import SERVER, XLA_PY
from trainium_lens.cli import main
from trainium_lens.model.job import Job
from trainium_lens.targets.base import EventSink, Target
from trainium_lens.targets.local import LocalTarget


def line_of(path: Path, needle: str) -> int:
    """1-based line holding ``needle`` (tests never hard-code line numbers)."""
    for number, text in enumerate(path.read_text().splitlines(), 1):
        if needle in text:
            return number
    raise AssertionError(f"{needle!r} not in {path}")


def run_harness(
    workspace: Path,
    file: str,
    run_dir: Path,
    *,
    functions: Sequence[str] = (),
    line: int | None = None,
    protocol: dict[str, int] | None = None,
    backend: str = "auto",
    python: str | None = None,
    extra_args: Sequence[str] = (),
    env: dict[str, str] | None = None,
    timeout: float = 300,
) -> tuple[int, list[dict], str]:
    spec = {
        "spec_version": 1,
        "batch_id": "t-" + run_dir.name,
        "workspace_root": str(workspace),
        "file": file,
        "functions": list(functions),
        "line": line,
        "backend": backend,
        "protocol": protocol or {},
        "run_dir": str(run_dir),
        "host": "local",
    }
    full_env = dict(os.environ, PYTHONPATH=str(SERVER))
    full_env.update(env or {})
    proc = subprocess.run(
        [python or sys.executable, *extra_args, "-m", "trainium_lens.harness"],
        input=json.dumps(spec),
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
        cwd=str(run_dir.parent),
    )
    events = []
    for raw in proc.stdout.splitlines():
        events.append(json.loads(raw))  # every stdout line must be an event
    return proc.returncode, events, proc.stderr


class HarnessStandIn(Target):
    """A stand-in for a Trainium host's target: ``run`` returns the given results
    as the harness there would have; their artifacts are local files. With
    ``fetch=False`` a fetch fails the test (a local run is read in place)."""

    def __init__(self, results: list[dict], *, fetch: bool = True) -> None:
        self.results = results
        self.allow_fetch = fetch

    def run(
        self,
        job: Job,
        on_event: EventSink,
        cancel: threading.Event | None = None,
        timeout: float | None = None,
    ) -> dict:
        return {"batch_id": job.batch_id, "results": self.results}

    def fetch(self, remote_path: str, dest: Path, *, workspace: Path) -> Path:
        if not self.allow_fetch:
            raise AssertionError("a local run's device profile is read in place")
        return LocalTarget().fetch(remote_path, dest, workspace=workspace)


def profile_xla(out: Path, file: str, function: str, *extra: str) -> dict:
    """``trainium-lens profile FILE FUNCTION --backend xla`` in the torch-xla venv, as a
    user runs it (3 timing calls: the wall is not what these tests check); its result."""
    args = ["profile", file, function, "--backend", "xla", "--python", str(XLA_PY)]
    assert main([*args, "--json", str(out), "--timing-calls", "3", *extra]) == 0
    data = json.loads(out.read_text())
    return data[0] if isinstance(data, list) else data

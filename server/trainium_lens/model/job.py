"""A profiling job: what to profile, on which backend, with which protocol.

The core builds a ``Job`` from the user's request (CLI or editor); a target
turns it into the JSON *spec* the harness reads on stdin, filling in the paths
as they are on that target (see docs/protocol.md, "Job spec").
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from trainium_lens.errors import UsageError
from trainium_lens.harness.spec import BACKENDS, MAXIMUM, MINIMUM, PROTOCOL_KEYS, SPEC_VERSION


def new_batch_id() -> str:
    """Sortable and unique: ``20261129-101500-3f2a``."""
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(2)


@dataclass
class Job:
    workspace: Path  # local workspace root (absolute)
    file: str  # relative to ``workspace``, POSIX separators
    functions: list[str] = field(default_factory=list)  # empty: all marked (or ``line``)
    line: int | None = None  # 1-based: the marked function containing this line
    backend: str = "auto"
    protocol: dict[str, int] = field(default_factory=dict)  # explicit overrides only
    batch_id: str = field(default_factory=new_batch_id)
    include: list[str] = field(default_factory=list)  # packages whose files count as user code
    nproc: int | None = None  # ranks under torchrun; None: the marker's nproc=, else 1
    # A job across nodes: this node's place in it (harness/nodes/launch.py; set per node
    # by targets/nodes/hosts.py and targets/nodes/slurm.py), or the SLURM request (``slurm``).
    nodes: dict | None = None
    slurm: dict | None = None
    # Files of the workspace the sync to a host would not list (``fix``'s copies and
    # driver under ``.trainium-lens/fixes/``), shipped with this job all the same.
    ships: list[str] = field(default_factory=list)

    def to_spec(self, workspace_root: str, run_dir: str, host: str) -> dict:
        """The harness's input, with paths as they are on the target."""
        spec = {
            "spec_version": SPEC_VERSION,
            "batch_id": self.batch_id,
            "workspace_root": workspace_root,
            "file": self.file,
            "functions": list(self.functions),
            "line": self.line,
            "backend": self.backend,
            "protocol": dict(self.protocol),
            "run_dir": run_dir,
            "host": host,
            "include": list(self.include),
        }
        if self.nproc is not None:
            spec["nproc"] = self.nproc
        if self.nodes is not None:
            spec["nodes"] = dict(self.nodes)
        if self.slurm is not None:
            spec["slurm"] = dict(self.slurm)
        return spec


def workspace_id(workspace: Path) -> str:
    """A stable, readable folder name for a workspace on a target:
    ``<basename>-<8 hex of the absolute path>`` (two checkouts never share one)."""
    absolute = str(Path(workspace).resolve())
    digest = hashlib.sha256(absolute.encode("utf-8", "surrogateescape")).hexdigest()[:8]
    base = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(absolute).name)[:40] or "workspace"
    return f"{base}-{digest}"


def workspace_root_for(path: Path) -> Path:
    """The git work tree holding ``path``, else the file's own folder."""
    folder = path.parent if path.is_file() or not path.exists() else path
    try:
        out = subprocess.run(
            ["git", "-C", str(folder), "rev-parse", "--show-toplevel"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        if out.returncode == 0 and out.stdout.strip():
            return Path(out.stdout.strip()).resolve()
    except (OSError, subprocess.TimeoutExpired):
        pass
    return folder.resolve()


def make_job(
    file: str | os.PathLike,
    *,
    functions: list[str] | None = None,
    line: int | None = None,
    backend: str = "auto",
    protocol: dict[str, int] | None = None,
    workspace: str | os.PathLike | None = None,
    include: list[str] | None = None,
    nproc: int | None = None,
) -> Job:
    """Validate a request against the local file system and build a ``Job``."""
    path = Path(file).expanduser().resolve()
    if not path.is_file():
        raise UsageError(f"no such file: {file}")
    root = Path(workspace).expanduser().resolve() if workspace else workspace_root_for(path)
    try:
        rel = path.relative_to(root)
    except ValueError:
        raise UsageError(f"{file} is not inside the workspace {root}") from None
    if backend not in BACKENDS:
        raise UsageError(f"unknown backend {backend!r}: use {', '.join(BACKENDS[:-1])} or {BACKENDS[-1]}")
    overrides = {k: int(v) for k, v in (protocol or {}).items() if v is not None}
    for key, value in overrides.items():
        if key not in PROTOCOL_KEYS:
            raise UsageError(f"unknown protocol option {key!r}")
        if value < MINIMUM[key]:
            raise UsageError(f"--{key.replace('_', '-')} must be at least {MINIMUM[key]}")
        if value > MAXIMUM[key]:
            raise UsageError(f"--{key.replace('_', '-')} must be at most {MAXIMUM[key]}")
    for name in include or []:
        if not name or not all(part.isidentifier() for part in name.split(".")):
            raise UsageError(
                f"--include {name!r}: expected a dotted package name (e.g. transformers.models.llama)"
            )
    if nproc is not None and (isinstance(nproc, bool) or int(nproc) < 1):
        raise UsageError(f"--nproc must be at least 1, got {nproc}")
    return Job(
        workspace=root,
        file=str(PurePosixPath(*rel.parts)),
        functions=list(functions or []),
        line=line,
        backend=backend,
        protocol=overrides,
        include=list(dict.fromkeys(include or [])),
        nproc=None if nproc is None else int(nproc),
    )


def wants_ranks(job: Job) -> bool:
    """Will this job run under torchrun (``--nproc``/setting, or a marker's
    ``nproc=`` above 1)? Such jobs start cold: the warm worker forks one harness
    per job, and torchrun's agent and ranks live in process groups of their own.
    The functions are chosen by the harness's own rule (``markers.select``)."""
    if job.nproc is not None:
        return job.nproc > 1
    from trainium_lens.harness.events import HarnessError
    from trainium_lens.harness.markers import find_marked, read_source, select
    from trainium_lens.harness.spec import nproc_for

    try:
        marked = find_marked(read_source(job.workspace / job.file))
        chosen = select(marked, job.functions, job.line, job.file)
        return nproc_for(job.nproc, chosen, job.file) > 1  # the launcher's own reading of nproc=
    except (OSError, UnicodeDecodeError, SyntaxError, HarnessError):
        return False  # the harness reports it, cold or warm

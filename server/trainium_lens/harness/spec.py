"""The job spec (stdin) and the protocol each function is profiled with.

Precedence of protocol values: defaults < marker options < ``spec.protocol``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

from trainium_lens.harness import markers
from trainium_lens.harness.events import HarnessError
from trainium_lens.harness.markers import KNOWN_OPTIONS, Marked

#: The job contract, owned here (the core imports these: model/job.py builds specs).
SPEC_VERSION = 1
PROTOCOL_KEYS = ("wait", "warmup", "active", "timing_calls")
DEFAULT_PROTOCOL = {"wait": 2, "warmup": 1, "active": 5, "timing_calls": 20}
MINIMUM = {"wait": 0, "warmup": 0, "active": 1, "timing_calls": 1}
#: Upper bounds: a step count past these is a typo, not a measurement (every profiled
#: step is kept in memory and in the trace; timing calls run one by one).
MAXIMUM = {"wait": 1000, "warmup": 1000, "active": 1000, "timing_calls": 100_000}
BACKENDS = ("auto", "neuron", "cuda", "cpu", "xla")


@dataclass
class Spec:
    batch_id: str
    workspace_root: str
    file: str  # relative to workspace_root, POSIX separators
    run_dir: str
    functions: list[str] = field(default_factory=list)
    line: int | None = None
    backend: str = "auto"
    protocol: dict[str, int] = field(default_factory=dict)
    host: str = "local"
    include: list[str] = field(default_factory=list)  # packages whose files are user code
    nproc: int | None = None  # ranks under torchrun (None: the markers' nproc=, else 1)
    nodes: dict | None = None  # this node's place in a job across nodes (harness/nodes/launch.py)
    slurm: dict | None = None  # a SLURM request: this process drives it (harness/nodes/slurm.py)

    @property
    def path(self) -> str:
        return os.path.join(self.workspace_root, *self.file.split("/"))


def _require(data: dict, key: str, kind: type) -> Any:
    value = data.get(key)
    if not isinstance(value, kind) or (kind is str and not value):
        raise HarnessError("spec", f"job spec: {key!r} must be a non-empty {kind.__name__}")
    return value


def parse_spec(text: str) -> Spec:
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise HarnessError("spec", f"job spec on stdin is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise HarnessError("spec", "job spec must be a JSON object")
    version = data.get("spec_version", SPEC_VERSION)
    if version != SPEC_VERSION:
        raise HarnessError("spec", f"job spec version {version!r} is not supported ({SPEC_VERSION} is)")
    functions = data.get("functions") or []
    if not isinstance(functions, list) or not all(isinstance(f, str) for f in functions):
        raise HarnessError("spec", "job spec: 'functions' must be a list of names")
    line = data.get("line")
    if line is not None and (not isinstance(line, int) or isinstance(line, bool) or line < 1):
        raise HarnessError("spec", "job spec: 'line' must be a 1-based line number or null")
    backend = data.get("backend") or "auto"
    if backend not in BACKENDS:
        raise HarnessError("spec", f"job spec: unknown backend {backend!r} (auto, neuron, cuda, cpu, xla)")
    protocol = data.get("protocol") or {}
    if not isinstance(protocol, dict):
        raise HarnessError("spec", "job spec: 'protocol' must be an object")
    checked = {}
    for key, value in protocol.items():
        if key not in DEFAULT_PROTOCOL:
            raise HarnessError("spec", f"job spec: unknown protocol option {key!r}")
        checked[key] = _check_int(key, value, "job spec")
    include = data.get("include") or []
    if not isinstance(include, list) or not all(isinstance(i, str) and _dotted(i) for i in include):
        raise HarnessError("spec", "job spec: 'include' must be a list of dotted package names")
    nproc = data.get("nproc")
    if nproc is not None and (not isinstance(nproc, int) or isinstance(nproc, bool) or nproc < 1):
        raise HarnessError("spec", "job spec: 'nproc' must be a positive integer or null")
    nodes = data.get("nodes")
    if nodes is not None:
        from trainium_lens.harness.nodes.launch import check_nodes

        why = check_nodes(nodes)
        if why:
            raise HarnessError("spec", f"job spec: {why}")
    slurm = data.get("slurm")
    if slurm is not None and not isinstance(slurm, dict):
        raise HarnessError("spec", "job spec: 'slurm' must be an object")
    root = _require(data, "workspace_root", str)
    if not os.path.isabs(root):
        raise HarnessError("spec", "job spec: 'workspace_root' must be an absolute path")
    run_dir = _require(data, "run_dir", str)
    return Spec(
        batch_id=_require(data, "batch_id", str),
        workspace_root=os.path.realpath(root),
        file=_require(data, "file", str).replace("\\", "/"),
        run_dir=run_dir,
        functions=list(functions),
        line=line,
        backend=backend,
        protocol=checked,
        host=str(data.get("host") or "local"),
        include=list(include),
        nproc=nproc,
        nodes=nodes,
        slurm=slurm,
    )


def _dotted(name: str) -> bool:
    return bool(name) and all(part.isidentifier() for part in name.split("."))


def marker_includes(marked: Marked, rel_file: str) -> list[str]:
    """The marker's ``include=a.b,c`` packages (checked for form only here)."""
    value = marked.options.get("include")
    if value is None:
        return []
    names = [n for n in value.split(",") if n]
    bad = [n for n in names if not _dotted(n)]
    if not names or bad:
        raise HarnessError(
            "parse",
            f"{rel_file}:{marked.marker_line}: marker option include= needs "
            f"dotted package names separated by commas, got {value!r}",
            rel_file,
            marked.marker_line,
        )
    return names


def _check_int(key: str, value: Any, where: str) -> int:
    if isinstance(value, str):
        try:
            value = int(value)
        except ValueError:
            pass
    if not isinstance(value, int) or isinstance(value, bool):
        raise HarnessError("spec", f"{where}: {key} must be an integer, got {value!r}")
    if value < MINIMUM[key]:
        raise HarnessError("spec", f"{where}: {key} must be at least {MINIMUM[key]}")
    if value > MAXIMUM[key]:
        raise HarnessError("spec", f"{where}: {key} must be at most {MAXIMUM[key]}")
    return value


def protocol_for(marked: Marked, spec: Spec, rel_file: str) -> dict[str, int]:
    """Defaults < marker options < spec overrides; bad marker options → ``parse`` error."""
    protocol = dict(DEFAULT_PROTOCOL)
    for key, value in marked.options.items():
        if key not in KNOWN_OPTIONS:
            raise HarnessError(
                "parse",
                f"unknown marker option {key!r} on {marked.name} (known: {', '.join(KNOWN_OPTIONS)})",
                rel_file,
                marked.marker_line,
            )
        if key == "nproc":  # read by the launcher (spec.nproc_for)
            continue
        if key in ("inputs", "compare"):
            if not value.isidentifier():
                what = "a function name" if key == "inputs" else "a group name"
                raise HarnessError(
                    "parse", f"marker option {key}= needs {what}, got {value!r}", rel_file, marked.marker_line
                )
            continue
        if key == "include":
            marker_includes(marked, rel_file)
            continue
        try:
            protocol[key] = _check_int(key, value, f"marker of {marked.name}")
        except HarnessError as exc:
            raise HarnessError("parse", exc.message, rel_file, marked.marker_line) from None
    protocol.update(spec.protocol)
    return protocol


def select(marked: list[Marked], spec: Spec, rel_file: str) -> list[Marked]:
    """The functions this job profiles, in file order (``markers.select``: the one rule)."""
    return markers.select(marked, spec.functions, spec.line, rel_file)


def nproc_for(nproc: int | None, chosen: list[Marked], rel_file: str) -> int:
    """Ranks for this job: the spec's ``nproc`` (CLI/setting) wins over the markers'."""
    if nproc:
        return int(nproc)
    values = [1]
    for m in chosen:
        raw = m.options.get("nproc")
        if raw is None:
            continue
        if not raw.isdigit() or int(raw) < 1:
            raise HarnessError(
                "parse",
                f"marker of {m.name}: nproc must be a positive integer, got {raw!r}",
                rel_file,
                m.marker_line,
            )
        values.append(int(raw))
    return max(values)

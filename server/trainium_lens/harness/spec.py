"""The job contract: the job spec (stdin) and the protocol each function is profiled
with; the script spec (``trainium-lens run``: the file ``TRAINIUM_LENS_RUN`` names).

Precedence of protocol values: defaults < marker options < ``spec.protocol``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, fields
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
        if key == "paired_s":  # read when the variants are timed in turn (eager/paired.py)
            try:
                markers.paired_seconds(marked.options)
            except ValueError as exc:
                raise HarnessError(
                    "parse", f"marker of {marked.name}: {exc}", rel_file, marked.marker_line
                ) from None
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


# -- the script spec (``trainium-lens run``) ------------------------------------------

#: The script spec's version. The harness accepts only its own: the core and the
#: harness it copies to a host ship together, so any change to the keys, their types
#: or their meaning bumps it (docs/protocol.md, "The script spec").
SCRIPT_SPEC_VERSION = 1
LAUNCHERS = ("python", "torchrun", "accelerate")  # what runs the script on each node
WRAPPERS = ("srun",)  # what runs the launcher on an allocation's nodes
_SCRIPT_REQUIRED = ("batch_id", "workspace_root", "run_dir", "command")


@dataclass(frozen=True)
class ScriptSpec:
    """What one ``trainium-lens run`` asks of the harness armed in the user's own
    process: built by ``engine/script.py``, written as JSON to the file that
    ``TRAINIUM_LENS_RUN`` names, read by ``harness/script/arm.py``. A target that
    runs the command elsewhere moves it there with ``dataclasses.replace``
    (``workspace_root``, ``run_dir``, ``host``)."""

    batch_id: str
    workspace_root: str  # absolute, on the machine the command runs on
    run_dir: str  # where the armed processes write: events.jsonl, rank<k>/, batch.json
    command: tuple[str, ...]  # the user's argv as given (the result shows it)
    launcher: str = "python"  # one of LAUNCHERS
    wrapper: str | None = None  # one of WRAPPERS, or None
    script_rel: str | None = None  # the script, relative to workspace_root (POSIX); None: unknown
    main_line: int = 1  # its ``if __name__ == "__main__":`` line: the result's function line
    steps: tuple[int, int] = (3, 5)  # the measured steps N..M, 2 <= N <= M (step 1 compiles)
    exit_after: bool = False  # end the process cleanly once the step after the window is done
    backend: str = "auto"  # one of BACKENDS
    include: tuple[str, ...] = ()  # installed packages or modules whose files count as user code
    step_on: str | None = None  # FILE:LINE or module.function ending a step (else detected)
    host: str = "local"  # where the command runs: the result's host and artifacts' location

    def to_dict(self) -> dict[str, Any]:
        """The JSON object ``parse_script_spec`` reads back (every key written)."""
        return {
            "spec_version": SCRIPT_SPEC_VERSION,
            "batch_id": self.batch_id,
            "workspace_root": self.workspace_root,
            "run_dir": self.run_dir,
            "command": list(self.command),
            "launcher": self.launcher,
            "wrapper": self.wrapper,
            "script_rel": self.script_rel,
            "main_line": self.main_line,
            "steps": list(self.steps),
            "exit_after": self.exit_after,
            "backend": self.backend,
            "include": list(self.include),
            "step_on": self.step_on,
            "host": self.host,
        }

    @classmethod
    def from_dict(cls, data: Any) -> ScriptSpec:
        """Checked as the job spec is: ``HarnessError`` (kind ``spec``) names what is wrong."""
        if not isinstance(data, dict):
            raise _bad_script("must be a JSON object")
        version = data.get("spec_version")
        if version != SCRIPT_SPEC_VERSION or isinstance(version, bool):
            raise _bad_script(f"version {version!r} is not supported ({SCRIPT_SPEC_VERSION} is)")
        known = ("spec_version", *(f.name for f in fields(cls)))
        unknown = [k for k in data if k not in known]
        if unknown:
            raise _bad_script(f"unknown key {unknown[0]!r} (known: {', '.join(known)})")
        missing = [k for k in _SCRIPT_REQUIRED if k not in data]
        if missing:
            raise _bad_script(f"missing key {missing[0]!r}")
        values: dict[str, Any] = {}
        for key, (check, what) in _SCRIPT_CHECKS.items():
            if key in data:
                if not check(data[key]):
                    raise _bad_script(f"{key!r} must be {what}, got {data[key]!r:.200}")
                values[key] = tuple(data[key]) if isinstance(data[key], list) else data[key]
        if not os.path.isabs(values["workspace_root"]):
            raise _bad_script("'workspace_root' must be an absolute path")
        return cls(**values)


def parse_script_spec(text: str) -> ScriptSpec:
    """The script spec from the file ``TRAINIUM_LENS_RUN`` names."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise _bad_script(f"is not valid JSON: {exc}") from None
    return ScriptSpec.from_dict(data)


def _bad_script(why: str) -> HarnessError:
    return HarnessError("spec", f"run spec: {why}")


def _text(v: Any) -> bool:
    return isinstance(v, str) and bool(v)


def _count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 1


def _texts(v: Any) -> bool:
    return isinstance(v, list) and all(_text(s) for s in v)


_SCRIPT_CHECKS: dict[str, tuple[Any, str]] = {
    "batch_id": (_text, "a non-empty string"),
    "workspace_root": (_text, "a non-empty string"),
    "run_dir": (_text, "a non-empty string"),
    "command": (lambda v: _texts(v) and bool(v), "a non-empty list of strings"),
    "launcher": (lambda v: v in LAUNCHERS, f"one of {', '.join(LAUNCHERS)}"),
    "wrapper": (lambda v: v is None or v in WRAPPERS, f"null or one of {', '.join(WRAPPERS)}"),
    "script_rel": (lambda v: v is None or _text(v), "null or a non-empty string"),
    "main_line": (_count, "a 1-based line number"),
    "steps": (
        lambda v: isinstance(v, list) and len(v) == 2 and all(_count(s) for s in v) and 2 <= v[0] <= v[1],
        "[N, M] with 2 <= N <= M",
    ),
    "exit_after": (lambda v: isinstance(v, bool), "true or false"),
    "backend": (lambda v: v in BACKENDS, f"one of {', '.join(BACKENDS)}"),
    "include": (_texts, "a list of names"),
    "step_on": (lambda v: v is None or _text(v), "null or a non-empty string"),
    "host": (_text, "a non-empty string"),
}

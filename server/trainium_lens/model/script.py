"""The command ``trainium-lens run -- COMMAND…`` runs, understood (never rewritten).

``parse_command`` tells a Python (``python [-m] SCRIPT|MODULE …``, any interpreter
by name or path) from torchrun (``torchrun …`` or ``python -m
torch.distributed.run …``) and accelerate's launcher (``accelerate launch …`` or
``python -m accelerate.commands.launch …``: torchrun underneath), finds the
script the steps run in (its workspace, its ``if __name__ == "__main__":``
line), and refuses, in one line each, what the harness cannot be injected
into: a command that is not Python, and ``-I``/``-E``/``-S``, which make
Python ignore ``PYTHONPATH`` or ``site`` (the harness would never arm).

``srun [its options] COMMAND`` wraps either (a job across nodes, docs/nodes.md):
srun exports the caller's environment to every task by default, so the same
injection reaches every node; ``--export`` that drops it is refused."""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from trainium_lens.errors import UsageError

PYTHON = re.compile(r"^(python|pypy)(\d+(\.\d+)*)?[a-z]?(\.exe)?$")
_TORCHRUN = re.compile(r"^torchrun(\.exe)?$")
_TORCHRUN_MODULES = ("torch.distributed.run", "torch.distributed.launch")
_ACCELERATE_MODULE = "accelerate.commands.launch"
# ``accelerate launch``'s options that take no value (its parser, accelerate 1.16.0;
# each also spelled with ``-`` for ``_``)
_ACCELERATE_FLAGS = frozenset(
    "--cpu --debug --downcast_bf16 --dynamo_use_dynamic --dynamo_use_fullgraph "
    "--dynamo_use_regional_compilation --enable_cpu_affinity --fp8_use_autocast_during_eval --help "
    "--module --multi_gpu --no_python --no_tpu_cluster --quiet --same_network --tpu --tpu_cluster "
    "--tpu_use_sudo --use_deepspeed --use_fsdp --use_megatron_lm --use_parallelism_config -h -m -q".split()
)
# Python's own options that take a value (as a separate word or attached)
_PY_VALUE = frozenset("cmWX")
_PY_NO_ARM = {
    "I": "-I (isolated mode ignores PYTHONPATH)",
    "E": "-E (ignores PYTHONPATH)",
    "S": "-S (no site: sitecustomize never runs)",
}
# torchrun's options that take no value
_TORCHRUN_FLAGS = frozenset(
    {
        "--standalone",
        "--no-python",
        "--no_python",
        "--run-path",
        "--run_path",
        "-m",
        "--module",
        "--help",
        "-h",
    }
)


# srun's options that take no value (``srun --help``, slurm 22.05; those with an
# optional value take it only as ``--opt=value``)
_SRUN_FLAGS = frozenset(
    "-E -H -I -k -K -l -O -Q -s -u -v -X -Z --contiguous --disable-status --exact --exclusive "
    "--hold --immediate --kill-on-bad-exit --label --multi-prog --nice --no-allocate --no-kill "
    "--overcommit --overlap --oversubscribe --preserve-env --propagate --pty --quiet "
    "--quit-on-interrupt --reboot --resv-ports --send-libs --compress --spread-job --test-only "
    "--unbuffered --use-min-nodes --verbose".split()
)


@dataclass
class ScriptCommand:
    argv: list[str]
    launcher: str  # "python" | "torchrun" | "accelerate": what runs on each node
    script: Path | None = None  # the file the steps run in (absolute), when known
    module: str | None = None  # python -m MODULE
    nproc: int | None = None  # torchrun --nproc-per-node N (accelerate launch --num_processes N)
    notes: list[str] = field(default_factory=list)
    wrapper: str | None = None  # "srun": the command's tasks run on the allocation's nodes
    inner: int = 0  # argv[inner] is the Python or torchrun (after the wrapper and its options)

    def main_line(self) -> int:
        """The ``if __name__ == "__main__":`` line of the script (1 if none)."""
        if self.script is None:
            return 1
        try:
            tree = ast.parse(self.script.read_text(encoding="utf-8"))
        except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
            return 1
        return main_guard_line(tree) or 1


def main_guard_line(tree: ast.Module) -> int | None:
    for node in tree.body:
        if isinstance(node, ast.If):
            t = node.test
            if (
                isinstance(t, ast.Compare)
                and isinstance(t.left, ast.Name)
                and t.left.id == "__name__"
                and len(t.comparators) == 1
                and isinstance(t.comparators[0], ast.Constant)
                and t.comparators[0].value == "__main__"
            ):
                return node.lineno
    return None


def parse_command(argv: list[str], cwd: Path) -> ScriptCommand:
    if not argv:
        raise UsageError("no command: give it after --, e.g. trainium-lens run -- python train.py")
    name = os.path.basename(argv[0])
    if name == "srun":
        return _srun(argv, cwd)
    if _TORCHRUN.match(name):
        return _torchrun(argv, argv[1:], cwd)
    if name in ("accelerate", "accelerate.exe") and argv[1:2] == ["launch"]:
        return _accelerate(argv, argv[2:], cwd)
    if name in ("accelerate-launch", "accelerate-launch.exe"):
        return _accelerate(argv, argv[1:], cwd)
    if not PYTHON.match(name):
        raise UsageError(
            f"{argv[0]} is not a Python command: run takes python [-m] SCRIPT|MODULE …, "
            "torchrun … SCRIPT …, python -m torch.distributed.run …, accelerate launch … SCRIPT …, "
            "or python or torchrun behind srun …"
        )
    i = 1
    while i < len(argv):
        word = argv[i]
        if word == "--" or not word.startswith("-") or word == "-":
            break
        if word.startswith("--"):
            i += 2 if word == "--check-hash-based-pycs" else 1
            continue
        letters = word[1:]
        for j, letter in enumerate(letters):
            if letter in _PY_NO_ARM:
                raise UsageError(f"python {_PY_NO_ARM[letter]}: the harness cannot arm in it; drop -{letter}")
            if letter in _PY_VALUE:
                value = letters[j + 1 :]
                if not value:
                    i += 1
                    value = argv[i] if i < len(argv) else ""
                if letter == "c":
                    raise UsageError("python -c is not a script: run takes python [-m] SCRIPT|MODULE …")
                if letter == "m":
                    if value in _TORCHRUN_MODULES:
                        return _torchrun(argv, argv[i + 1 :], cwd)
                    if value == _ACCELERATE_MODULE:
                        return _accelerate(argv, argv[i + 1 :], cwd)
                    return ScriptCommand(list(argv), "python", _module_file(value, cwd), module=value)
                break
        i += 1
    if i < len(argv) and argv[i] == "--":
        i += 1
    if i >= len(argv) or argv[i] == "-":
        raise UsageError("no script: run takes python [-m] SCRIPT|MODULE …")
    script = (cwd / argv[i]).resolve()
    if not script.is_file():
        raise UsageError(f"no such script: {argv[i]}")
    return ScriptCommand(list(argv), "python", script)


def _srun(argv: list[str], cwd: Path) -> ScriptCommand:
    i = 1
    while i < len(argv) and argv[i].startswith("-"):
        word = argv[i]
        key, eq, value = word.partition("=")
        if key == "--export" and value and not _exports_all(value):
            raise UsageError(
                f"srun {word} does not pass this environment to the tasks: the harness could not arm "
                "there; use --export=ALL (srun's default) or ALL,VAR=…"
            )
        if key == "--multi-prog":
            raise UsageError("srun --multi-prog runs a program list: run takes srun … python|torchrun …")
        if eq or key in _SRUN_FLAGS or (len(key) > 2 and not key.startswith("--")):
            i += 1  # --opt=value, a flag, or -N2 (a short option with its value attached)
        else:
            if key == "--export" and i + 1 < len(argv) and not _exports_all(argv[i + 1]):
                raise UsageError(
                    f"srun --export {argv[i + 1]} does not pass this environment to the tasks: use "
                    "--export=ALL (srun's default) or ALL,VAR=…"
                )
            i += 2
    if i >= len(argv):
        raise UsageError("srun names no command: run takes srun [its options] python|torchrun … SCRIPT …")
    name = os.path.basename(argv[i])
    if not (PYTHON.match(name) or _TORCHRUN.match(name)):
        raise UsageError(
            f"srun runs {argv[i]}, not Python: run takes srun [its options] python [-m] SCRIPT … "
            "or srun [its options] torchrun … SCRIPT …"
        )
    inner = parse_command(argv[i:], cwd)
    return ScriptCommand(
        list(argv), inner.launcher, inner.script, inner.module, inner.nproc, wrapper="srun", inner=i
    )


def _exports_all(value: str) -> bool:
    return value.split(",", 1)[0].upper() == "ALL"


def _torchrun(argv: list[str], rest: list[str], cwd: Path) -> ScriptCommand:
    i, module, values = _options(
        rest,
        _TORCHRUN_FLAGS,
        lambda key: key,
        ("--no-python", "--no_python"),
        "torchrun --no-python runs no Python: run needs the workers to be Python",
    )
    nproc = next(
        (
            int(v)
            for k in ("--nproc-per-node", "--nproc_per_node", "--nproc-per_node")
            if (v := values.get(k, "")).isdigit()
        ),
        None,
    )
    return _launched(
        argv,
        "torchrun",
        rest,
        i,
        module,
        nproc,
        cwd,
        "torchrun names no script: run takes torchrun [its options] SCRIPT ARGS…",
    )


def _accelerate(argv: list[str], rest: list[str], cwd: Path) -> ScriptCommand:
    """``accelerate launch [its options] SCRIPT ARGS…``: one process (its simple
    launcher: ``python SCRIPT`` as its child) or torchrun's agent in the launcher's
    own process (``--multi_gpu``, ``--use_fsdp``, …: the workers its children)."""
    i, module, values = _options(
        rest,
        _ACCELERATE_FLAGS,
        lambda key: key if not key.startswith("--") or len(key) == 2 else "--" + key[2:].replace("-", "_"),
        ("--no_python",),
        "accelerate launch --no_python runs no Python: run needs the script to be Python",
    )
    value = values.get("--num_processes", "")
    return _launched(
        argv,
        "accelerate",
        rest,
        i,
        module,
        int(value) if value.isdigit() else None,
        cwd,
        "accelerate launch names no script: run takes accelerate launch [its options] SCRIPT ARGS…",
    )


def _options(
    rest: list[str],
    flags: frozenset[str],
    norm: Callable[[str], str],
    no_python: tuple[str, ...],
    no_python_error: str,
) -> tuple[int, bool, dict[str, str]]:
    """A launcher's options up to its script: the script's index, whether ``-m`` names a
    module, and each option's value by its key (``norm``'s spelling); ``flags`` take none."""
    i, module, values = 0, False, {}
    while i < len(rest) and rest[i].startswith("-"):
        raw, eq, value = rest[i].partition("=")
        key = norm(raw)
        if key in no_python:
            raise UsageError(no_python_error)
        if key in ("-m", "--module"):
            module = True
        if key in flags or eq:
            i += 1
        else:
            value = rest[i + 1] if i + 1 < len(rest) else ""
            i += 2
        values[key] = value
    return i, module, values


def _launched(
    argv: list[str],
    launcher: str,
    rest: list[str],
    i: int,
    module: bool,
    nproc: int | None,
    cwd: Path,
    no_script: str,
) -> ScriptCommand:
    """The script (or ``-m`` module) a launcher's options end at, ``rest[i]``."""
    if i >= len(rest):
        raise UsageError(no_script)
    target = rest[i]
    if module:
        return ScriptCommand(list(argv), launcher, _module_file(target, cwd), module=target, nproc=nproc)
    script = (cwd / target).resolve()
    if not script.is_file():
        raise UsageError(f"no such script: {target}")
    return ScriptCommand(list(argv), launcher, script, nproc=nproc)


def _module_file(module: str, cwd: Path) -> Path | None:
    base = cwd.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__main__.py"):
        if candidate.is_file():
            return candidate.resolve()
    return None


def parse_steps(text: str) -> tuple[int, int]:
    """``N:M`` (1-based, inclusive; N ≥ 2: step 1 runs unprofiled, with compiles)."""
    first, sep, last = text.partition(":")
    if not sep or not first.isdigit() or not last.isdigit():
        raise UsageError(f"--steps takes N:M (e.g. 3:5), got {text!r}")
    n, m = int(first), int(last)
    if n < 2 or m < n:
        raise UsageError(f"--steps {text}: need 2 <= N <= M (step 1 runs unprofiled: compiles, warm-up)")
    return n, m

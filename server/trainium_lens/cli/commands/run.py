"""``trainium-lens run [options] -- COMMAND…``: profile steps N..M of a script as
the user runs it (``python train.py --lr 3e-4``, ``torchrun … train.py``),
unmodified; the script then runs on to its end, its exit status ours."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from trainium_lens.cli.console import Progress, style_for
from trainium_lens.cli.outputs import write_json
from trainium_lens.cli.render.ranks import render_ranks
from trainium_lens.cli.render.result import render_result
from trainium_lens.cli.render.text import terminal_safe
from trainium_lens.cli.render.work import render_work
from trainium_lens.cli.signals import stopping_on_signals
from trainium_lens.cli.where import add_host_arguments, where_from_args
from trainium_lens.engine import script as engine
from trainium_lens.errors import LensError, NotStored, UsageError
from trainium_lens.harness.spec import BACKENDS
from trainium_lens.model.script import parse_command, parse_steps
from trainium_lens.model.store import RunStore
from trainium_lens.targets.make import make_target


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "run",
        help="profile steps of the training script you already run: run -- python train.py ARGS",
        description="Run COMMAND as you would (python [-m] SCRIPT|MODULE ARGS, torchrun … SCRIPT ARGS, "
        "or either behind srun …) "
        "with the profiler injected: steps N..M (optimizer steps) are profiled per source line, "
        "then the script runs on at full speed. The exit status is the script's.",
    )
    p.add_argument("--steps", default="3:5", metavar="N:M", help="the measured steps (default 3:5)")
    p.add_argument(
        "--exit-after",
        action="store_true",
        help="end the script (every rank) cleanly after the window and its work step (FLOPs, bytes, memory)",
    )
    p.add_argument("--backend", choices=BACKENDS, default="auto", help="where the steps' time is read")
    p.add_argument(
        "--step-on",
        metavar="FILE:LINE|module.function",
        help="a script with no optimizer: each execution of FILE:LINE (or call of module.function) is a step",
    )
    p.add_argument(
        "--include", action="append", default=[], metavar="PACKAGE", help="count PACKAGE's lines too"
    )
    p.add_argument("--env", action="append", default=[], metavar="K=V", help="set K=V for the command")
    p.add_argument(
        "--workspace", metavar="DIR", help="workspace root (default: the git work tree of the script)"
    )
    p.add_argument("--json", metavar="PATH", help="also write the result to PATH")
    p.add_argument(
        "--no-store", action="store_true", help="do not save the result in <workspace>/.trainium-lens/runs"
    )
    p.add_argument("--timeout", type=float, metavar="SECONDS", help="stop the command after SECONDS")
    add_host_arguments(
        p,
        "sync the workspace to and run the command on",
        python=False,
        remote_python_help="the host's python for the command "
        "(default: the newest Neuron venv there, else python3)",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="every row of the long sections")
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND…", help="the command, after --")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if args.timeout is not None and not 0 < args.timeout < float("inf"):
        raise UsageError(f"--timeout must be a positive number of seconds, got {args.timeout:g}")
    env = {}
    for item in args.env:
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise UsageError(f"--env takes K=V, got {item!r}")
        env[key] = value
    cwd = Path.cwd()
    parsed = parse_command(command, cwd)
    if args.host and parsed.launcher == "accelerate" and not _names_python(command[0]):
        # the host's Python replaces the local interpreter word, and accelerate's console
        # script has none: the same launcher run as its module, by the host's Python
        command = _accelerate_as_module(command)
        parsed = parse_command(command, cwd)
    req = engine.ScriptRequest(
        command=parsed,
        cwd=cwd,
        steps=parse_steps(args.steps),
        exit_after=args.exit_after,
        backend=args.backend,
        include=tuple(args.include),
        step_on=args.step_on,
        workspace=Path(args.workspace) if args.workspace else None,
        env=env,
    )
    store = None if args.no_store else RunStore(req.root())
    progress = Progress(sys.stderr, live=False)
    not_stored = None
    target = make_target(where_from_args(args))
    try:
        with stopping_on_signals():
            results, code = engine.run(
                req, target, _progress(progress, args.exit_after), timeout=args.timeout, store=store
            )
    except NotStored as err:
        results, code, not_stored = err.results, 0, err
    except engine.ScriptFailed as err:
        progress.close()
        print(f"trainium-lens: {' '.join(str(err).split())}", file=sys.stderr)
        return err.returncode or 1
    finally:
        target.close()
        progress.close()
    style = style_for(sys.stdout, args.verbose)
    print(
        terminal_safe(
            "\n\n".join(
                _header(r) + render_result(r, style) + render_work(r, style) + render_ranks(r, style)
                for r in results
            )
        )
    )
    if args.json:
        write_json(args.json, results[0].to_dict())
    if not_stored is not None:
        sys.stdout.flush()
        raise LensError(f"{not_stored} (the table above is not saved; --no-store skips saving)")
    return code


def _accelerate_as_module(command: list[str]) -> list[str]:
    """``accelerate launch …`` / ``accelerate-launch …`` → ``python -m accelerate.commands.launch …``."""
    rest = command[2:] if command[1:2] == ["launch"] else command[1:]
    return ["python", "-m", "accelerate.commands.launch", *rest]


def _names_python(word: str) -> bool:
    return os.path.basename(word).startswith(("python", "pypy"))


def _header(result) -> str:  # type: ignore[no-untyped-def]
    s = result.script
    if s is None:
        return ""
    steps = f"steps {s.steps[0]}-{s.steps[1]}"
    if s.profiled_steps and s.profiled_steps[1] != s.steps[1]:
        steps += f" (recorded {s.profiled_steps[0]}-{s.profiled_steps[1]}: each with its unlabelled twin)"
    ref = f"reference: {s.reference_before} unprofiled steps before, {s.reference_after} after"
    command = " ".join(os.path.basename(a) if i == 0 else a for i, a in enumerate(s.command))
    found = f"found by the {s.detector} detector"
    if s.framework_steps:
        found += f" (its steps {s.framework_steps[0]}-{s.framework_steps[1]})"
    if s.micro_batches and s.micro_batches > 1:  # gradient accumulation
        found += f", {s.micro_batches} micro-batches per step"
    if s.skipped_steps:
        found += f", {s.skipped_steps} of them skipped by the optimizer (inf/NaN)"
    return f"{command}\n{steps}, {found}; {ref}\n"


def _progress(progress: Progress, exit_after: bool):  # type: ignore[no-untyped-def]
    def on_event(event: dict) -> None:
        kind = event.get("event")
        rank = event.get("rank")
        prefix = f"rank {rank}: " if rank is not None else ""
        if kind == "stage" and (rank in (None, 0)):
            progress.status(f"trainium-lens: {event.get('message')}")
        elif kind == "warning":
            progress(dict(event, message=prefix + str(event.get("message"))))
        elif kind == "detector" and rank in (None, 0):
            progress.status(f"trainium-lens: steps found by the {event.get('name')} hooks")
        elif kind == "result" and rank in (None, 0):
            progress.status(
                "trainium-lens: profile written; "
                + ("ending the script here (--exit-after)" if exit_after else "the script runs on unprofiled")
            )

    return on_event

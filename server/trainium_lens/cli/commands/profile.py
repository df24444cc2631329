"""``trainium-lens profile FILE [FUNCTION]``: profile marked functions, print tables."""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import sys
import threading
import time
from types import FrameType
from typing import Any, NoReturn, TextIO

from trainium_lens.cli.outputs import write_output
from trainium_lens.cli.render.batch import render_batch
from trainium_lens.cli.render.engines import render_engines
from trainium_lens.cli.render.ranks import render_ranks
from trainium_lens.cli.render.result import render_result
from trainium_lens.cli.render.text import Style, terminal_safe
from trainium_lens.cli.render.work import render_work
from trainium_lens.cli.where import add_host_arguments, add_nodes_arguments, where_from_args
from trainium_lens.engine import runner
from trainium_lens.errors import Cancelled, HarnessError, LensError, NotStored, UsageError
from trainium_lens.harness.spec import BACKENDS, PROTOCOL_KEYS
from trainium_lens.model.job import Job, make_job
from trainium_lens.model.result import Result
from trainium_lens.model.store import RunStore
from trainium_lens.targets.make import make_target

PROTOCOL_HELP = {
    "wait": "steps run before the profiler records (default 2)",
    "warmup": "steps recorded but discarded (default 1)",
    "active": "measured steps; figures are their per-step average (default 5)",
    "timing_calls": "unprofiled calls timed after profiling (default 20)",
}


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "profile",
        help="profile marked functions and print per-line device time",
        description="Profile the marked function(s) of FILE with torch.profiler and print, "
        "per source line, the time of the ATen ops it dispatched.",
    )
    p.add_argument("file", metavar="FILE", help="a Python file with marked functions")
    p.add_argument(
        "function",
        metavar="FUNCTION",
        nargs="?",
        help="the marked function to profile (default: all, compared)",
    )
    p.add_argument(
        "--line", type=int, metavar="N", help="profile the marked function containing line N (1-based)"
    )
    p.add_argument(
        "--backend",
        choices=BACKENDS,
        default="auto",
        help="where the function runs (default auto: neuron, else torch-neuronx's XLA "
        "flavour on Trn1, else cuda, else cpu; xla: any torch-xla install)",
    )
    for key in PROTOCOL_KEYS:
        p.add_argument(
            f"--{key.replace('_', '-')}",
            dest=key,
            type=int,
            metavar="N",
            help=PROTOCOL_HELP[key] + " (overrides the marker's option)",
        )
    p.add_argument(
        "--include",
        action="append",
        metavar="PACKAGE",
        default=[],
        help="also attribute time to the lines of this installed package or module "
        "(e.g. transformers.models.llama); repeatable",
    )
    p.add_argument(
        "--nproc",
        type=int,
        metavar="N",
        help="run on N ranks under torchrun (one result: per-line median across ranks, "
        "the spread and the slowest rank; overrides the marker's nproc=)",
    )
    p.add_argument(
        "--json", metavar="PATH", help="also write the result (several functions: a JSON list) to PATH"
    )
    p.add_argument(
        "--workspace", metavar="DIR", help="workspace root (default: the git work tree holding FILE)"
    )
    add_host_arguments(p, "profile on")
    add_nodes_arguments(p)
    p.add_argument(
        "--timeout",
        type=float,
        metavar="SECONDS",
        help="stop the run (and everything it started) after SECONDS",
    )
    p.add_argument(
        "--no-store", action="store_true", help="do not save the results in <workspace>/.trainium-lens/runs"
    )
    add_verbose_argument(p)
    p.set_defaults(handler=run)


def add_verbose_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="every row of the long sections (an xla run's fusions and HLO instructions; "
        "the default shows the top ones and says how many more)",
    )


class Progress:
    """Harness events on stderr: one live line on a terminal (its clock ticking
    through long stages such as a compile), plain lines otherwise."""

    TICK_S = 0.5

    def __init__(self, stream: TextIO = sys.stderr, live: bool | None = None) -> None:
        self.stream = stream
        self.live = stream.isatty() if live is None else live
        self.started = time.monotonic()
        self._text = ""
        self._shown = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        if self.live:
            threading.Thread(target=self._tick, daemon=True).start()

    def __call__(self, event: dict) -> None:
        kind = event.get("event")
        if kind == "stage":
            self.status(_stage_text(event))
        elif kind == "warning":
            self._line(f"  warning: {event.get('message', '')}")
        elif kind == "output":
            self._line(f"  | {event.get('text', '')}")

    def status(self, text: str) -> None:
        with self._lock:
            self._text = text
            if self.live:
                self._draw()
            else:
                self.stream.write(f"  {text}\n")
                self.stream.flush()

    def _draw(self) -> None:
        elapsed = time.monotonic() - self.started
        width = max(20, shutil.get_terminal_size().columns - 1)
        line = f"{elapsed:5.1f}s  {self._text}"
        self.stream.write("\r\x1b[K" + line[:width])
        self.stream.flush()
        self._shown = True

    def _tick(self) -> None:
        while not self._stop.wait(self.TICK_S):
            with self._lock:
                if self._shown:
                    self._draw()

    def _line(self, text: str) -> None:
        with self._lock:
            self._clear()
            self.stream.write(text + "\n")
            if self.live and self._text:
                self._draw()
            else:
                self.stream.flush()

    def _clear(self) -> None:
        if self._shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._shown = False

    def close(self) -> None:
        self._stop.set()
        with self._lock:
            self._clear()


def _stage_text(event: dict) -> str:
    stage = str(event.get("stage", ""))
    function = event.get("function")
    message = event.get("message")
    text = f"[{stage}]" + (f" {function}" if function else "")
    if event.get("step") is not None and event.get("of") is not None:
        text += f" step {event['step']}/{event['of']}"
        if message and str(message).startswith("step "):
            message = None  # says the same again
    if message:
        text += f": {message}" if function or event.get("step") is not None else f" {message}"
    return text


def style_for(stream: TextIO, verbose: bool = False) -> Style:
    """Unicode where the stream can take it; on a terminal, its width (a pipe or
    a file gets the full table, the same every time)."""
    encoding = (getattr(stream, "encoding", None) or "").lower().replace("-", "")
    width = shutil.get_terminal_size().columns if stream.isatty() else None
    return Style(unicode=encoding.startswith("utf"), width=width, verbose=verbose)


def one_line(err: LensError) -> LensError:
    """The same error with a one-line message; a user-code error names the user's line."""
    message = " ".join(str(err).split())
    if isinstance(err, HarnessError):
        if (
            err.kind in ("user_code", "inputs")
            and err.file
            and err.line
            and f"{err.file}:{err.line}" not in message
        ):
            message = f"{err.file}:{err.line}: {message}"
    err.args = (message,)  # str(err) is args[0]; kind, file, line... stay
    return err


def _stop_on_signals() -> dict:
    """SIGTERM/SIGHUP (a closed terminal, a killed parent) stop the run the way
    Ctrl-C does: the exception unwinds through the target, which stops the
    harness's process group before the CLI exits."""

    def stop(signum: int, _frame: FrameType | None) -> NoReturn:
        raise Cancelled(f"stopped by {signal.Signals(signum).name}")

    previous = {}
    for signum in (signal.SIGTERM, signal.SIGHUP):
        try:
            previous[signum] = signal.signal(signum, stop)
        except ValueError:  # not the main thread (embedded use): leave as is
            pass
    return previous


def write_json(path: str, data: Any) -> None:
    write_output(path, json.dumps(data, indent=1), "--json")


def run(args: argparse.Namespace) -> int:
    if args.timeout is not None and not 0 < args.timeout < float("inf"):
        raise UsageError(f"--timeout must be a positive number of seconds, got {args.timeout:g}")
    protocol = {k: getattr(args, k) for k in PROTOCOL_KEYS if getattr(args, k) is not None}
    job = make_job(
        args.file,
        functions=[args.function] if args.function else [],
        line=args.line,
        backend=args.backend,
        protocol=protocol,
        workspace=args.workspace,
        include=args.include,
        nproc=args.nproc,
    )
    store = None if args.no_store else RunStore(job.workspace)
    results, not_stored = profile_job(job, args, store)
    style = style_for(sys.stdout, args.verbose)
    sections = [
        render_result(r, style) + render_work(r, style) + render_engines(r, style) + render_ranks(r, style)
        for r in results
    ]
    sections += render_batch(results, style)  # variants compared, the rest summarized
    print(terminal_safe("\n\n".join(sections)))  # engines/ranks tables too
    if args.json:
        data = results[0].to_dict() if len(results) == 1 else [r.to_dict() for r in results]
        write_json(args.json, data)
    if not_stored is not None:
        sys.stdout.flush()
        raise one_line(LensError(f"{not_stored} (the tables above are not saved; --no-store skips saving)"))
    return 0


def profile_job(
    job: Job, args: argparse.Namespace, store: RunStore | None
) -> tuple[list[Result], NotStored | None]:
    """Run ``job`` on the target the arguments name (``cli/where.py``), with
    the progress line on stderr and SIGTERM/SIGHUP stopping it: shared with ``check``.
    A run that finished but could not be stored comes back with why (``NotStored``):
    the caller shows its results first."""
    target = make_target(where_from_args(args))
    progress = Progress(sys.stderr)
    progress.status(f"starting the harness on {target.host}")
    previous = _stop_on_signals()
    not_stored: NotStored | None = None
    try:
        results = runner.profile(job, target, progress, timeout=args.timeout, store=store)
        if store is None:  # not stored: no result will ever name the run folder (the tables are out)
            runner.remove_own_folder(job, target)
    except NotStored as err:  # the run finished: its tables first, then why it is not kept
        results, not_stored = err.results, err
    except LensError as err:
        raise one_line(err) from None
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        progress.close()
        target.close()
    return results, not_stored

"""``trainium-lens profile FILE [FUNCTION]``: profile marked functions, print tables."""

from __future__ import annotations

import argparse
import sys

from trainium_lens.cli.common import PROTOCOL_HELP, add_verbose_argument
from trainium_lens.cli.console import style_for
from trainium_lens.cli.outputs import write_json
from trainium_lens.cli.profiling import one_line, profile_job
from trainium_lens.cli.render.batch import render_batch
from trainium_lens.cli.render.engines import render_engines
from trainium_lens.cli.render.ranks import render_ranks
from trainium_lens.cli.render.result import render_result
from trainium_lens.cli.render.text import terminal_safe
from trainium_lens.cli.render.work import render_work
from trainium_lens.cli.where import add_host_arguments, add_nodes_arguments
from trainium_lens.errors import LensError, UsageError
from trainium_lens.harness.spec import BACKENDS, PROTOCOL_KEYS
from trainium_lens.model.job import make_job
from trainium_lens.model.store import RunStore


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

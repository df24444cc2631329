"""``trainium-lens show [RESULT.json|RUN_ID|latest[~N] [FILE [FUNCTION]]]``: re-print stored results.

Accepts what ``profile`` leaves behind: a ``--json`` file (one result, or a
list for several functions), a run id, or a unique prefix of one. A batch id
(the run id without its ``-N`` index) shows every function of that run and
the comparison, exactly as ``profile`` printed them. ``latest``/``latest~N``
name a function's runs by age (``refs.py``). With nothing named, it lists the
stored runs (as ``runs`` does) instead of failing.
"""

from __future__ import annotations

import argparse
import sys

from trainium_lens.cli.common import add_verbose_argument, add_workspace_argument
from trainium_lens.cli.console import style_for
from trainium_lens.cli.pipes import emit
from trainium_lens.cli.refs import resolve_many, stored
from trainium_lens.cli.render.batch import render_batch
from trainium_lens.cli.render.engines import render_engines
from trainium_lens.cli.render.ranks import render_ranks
from trainium_lens.cli.render.result import render_result
from trainium_lens.cli.render.runs import listing
from trainium_lens.cli.render.text import finish
from trainium_lens.cli.render.work import render_work


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "show",
        help="re-print stored results",
        description="Print results saved by `profile` (a --json file, a run id or a unique "
        "prefix, or a batch id) as `profile` printed them.",
    )
    p.add_argument("run", metavar="RESULT.json|RUN_ID|latest[~N]", nargs="?")
    p.add_argument("file", metavar="FILE", nargs="?", help="with latest[~N]: the profiled file")
    p.add_argument("function", metavar="FUNCTION", nargs="?", help="with latest[~N]: the function")
    add_workspace_argument(p)
    add_verbose_argument(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.run is None:
        return list_instead(args.workspace)
    results = resolve_many(args.run, args.workspace, args.file, args.function)
    style = style_for(sys.stdout, args.verbose)
    sections = [
        render_result(r, style) + render_work(r, style) + render_engines(r, style) + render_ranks(r, style)
        for r in results
    ]
    sections += render_batch(results, style)  # variants compared, the rest summarized
    emit(finish("\n\n".join(sections), style))  # engines/ranks tables too
    return 0


def list_instead(workspace: str | None) -> int:
    """``show`` with no run: what there is to show, and how."""
    store, results = stored(workspace, None, None)
    if not results:
        print(
            f"trainium-lens: no stored runs in {store.runs}; profile a file first "
            f"(trainium-lens profile FILE), or name a RESULT.json",
            file=sys.stderr,
        )
        return 0
    style = style_for(sys.stdout)
    head = "stored runs, newest first (show RUN, show latest [FILE [FUNCTION]], show latest~1 ...):"
    emit(finish("\n".join([head, *listing(results, style)]), style))
    return 0

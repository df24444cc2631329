"""``trainium-lens runs [FILE [FUNCTION]]``: the stored runs, newest first.

One row per run: when (UTC), the function, backend@host, the step time on
the run's clock, the commit it measured (``+dirty``: the tree had changes),
and the run id that ``show``/``compare``/``check --baseline`` take.
"""

from __future__ import annotations

import argparse
import sys

from trainium_lens.cli.common import add_workspace_argument
from trainium_lens.cli.console import style_for
from trainium_lens.cli.pipes import emit
from trainium_lens.cli.refs import stored
from trainium_lens.cli.render.runs import listing
from trainium_lens.cli.render.text import finish


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "runs",
        help="list stored runs (newest first) with their commits",
        description="List the runs stored in <workspace>/.trainium-lens/runs, newest first: "
        "when, function, backend@host, step time, the git commit each measured, run id.",
    )
    p.add_argument("file", metavar="FILE", nargs="?", help="only runs of functions of this file")
    p.add_argument("function", metavar="FUNCTION", nargs="?", help="only runs of this function")
    p.add_argument("--limit", type=int, metavar="N", help="at most N rows")
    add_workspace_argument(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    store, results = stored(args.workspace, args.file, args.function)
    if args.limit is not None:
        results = results[-args.limit :] if args.limit > 0 else []
    if not results:
        where = " of " + "::".join(x for x in (args.file, args.function) if x) if args.file else ""
        print(f"trainium-lens: no stored runs{where} in {store.runs}", file=sys.stderr)
        return 0
    for path, reason in store.skipped:  # one bad file must not hide the others, nor go unsaid
        print(f"trainium-lens: skipped {path.name}: {reason}", file=sys.stderr)
    style = style_for(sys.stdout)
    text = "\n".join(listing(results, style, qualified=args.function is None))
    emit(finish(text, style))
    return 0

"""``trainium-lens compare A B [FILE [FUNCTION]]``: what changed per line between two runs
(``latest~1 latest``: the last change to a function, see ``refs.py``)."""

from __future__ import annotations

import argparse
import sys

from trainium_lens.analysis.compare import diff_runs
from trainium_lens.cli.common import add_workspace_argument
from trainium_lens.cli.pipes import emit
from trainium_lens.cli.profile_cmd import style_for
from trainium_lens.cli.refs import back
from trainium_lens.cli.render import render_diff
from trainium_lens.cli.show_cmd import resolve


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "compare",
        help="per-line differences between two runs",
        description="Compare two results (files, run ids or unique prefixes): per-line "
        "self time before and after, lines matched by their text and number.",
    )
    p.add_argument("before", metavar="A", help="the earlier run (RESULT.json, RUN_ID, latest~N)")
    p.add_argument("after", metavar="B", help="the later run (RESULT.json, RUN_ID, latest)")
    p.add_argument("file", metavar="FILE", nargs="?", help="with latest[~N]: the profiled file")
    p.add_argument("function", metavar="FUNCTION", nargs="?", help="with latest[~N]: the function")
    add_workspace_argument(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    before = _resolve(args.before, args)
    after = _resolve(args.after, args)
    emit(render_diff(diff_runs(before, after), style_for(sys.stdout)))
    return 0


def _resolve(ref: str, args: argparse.Namespace):
    """FILE/FUNCTION name the function of a ``latest~N``; a run id or file stands alone."""
    if back(ref) is not None:
        return resolve(ref, args.workspace, args.file, args.function)
    return resolve(ref, args.workspace)

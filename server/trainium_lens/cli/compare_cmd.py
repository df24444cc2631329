"""``trainium-lens compare A B``: what changed per line between two runs."""

from __future__ import annotations

import argparse
import sys

from trainium_lens.analysis.compare import diff_runs
from trainium_lens.cli.common import add_workspace_argument
from trainium_lens.cli.profile_cmd import style_for
from trainium_lens.cli.render import render_diff
from trainium_lens.cli.show_cmd import resolve


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "compare",
        help="per-line differences between two runs",
        description="Compare two results (files, run ids or unique prefixes): per-line "
        "self time before and after, lines matched by their text and number.",
    )
    p.add_argument("before", metavar="A", help="the earlier run (RESULT.json or RUN_ID)")
    p.add_argument("after", metavar="B", help="the later run (RESULT.json or RUN_ID)")
    add_workspace_argument(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    before = resolve(args.before, args.workspace)
    after = resolve(args.after, args.workspace)
    print(render_diff(diff_runs(before, after), style_for(sys.stdout)))
    return 0

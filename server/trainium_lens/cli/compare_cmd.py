"""``trainium-lens compare A B``: what changed per line between two runs,
forward, backward and both (``analysis.compare.diff_runs``)."""

from __future__ import annotations

import argparse
import sys

from trainium_lens.analysis.compare import diff_runs
from trainium_lens.cli.common import add_workspace_argument
from trainium_lens.cli.profile_cmd import style_for, write_json
from trainium_lens.cli.render_compare import render_diff
from trainium_lens.cli.show_cmd import resolve
from trainium_lens.errors import UsageError


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "compare",
        help="per-line differences between two runs",
        description="Compare two results (files, run ids or unique prefixes): per line, "
        "forward, backward and forward+backward before and after (lines matched by file, "
        "text and number), the step's totals, and the speedup on the true clock (device "
        "time, else the unprofiled wall medians).",
    )
    p.add_argument("before", metavar="A", help="the earlier run (RESULT.json or RUN_ID)")
    p.add_argument("after", metavar="B", help="the later run (RESULT.json or RUN_ID)")
    p.add_argument("--json", metavar="PATH", help="also write the comparison as JSON to PATH")
    add_workspace_argument(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    before = resolve(args.before, args.workspace)
    after = resolve(args.after, args.workspace)
    diff = diff_runs(before, after)
    print(render_diff(diff, style_for(sys.stdout)))
    if args.json:
        try:
            write_json(args.json, diff.to_dict())
        except OSError as exc:  # the table above is printed: nothing is lost
            raise UsageError(f"cannot write {args.json}: {exc.strerror or exc}") from None
    return 0

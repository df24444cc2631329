"""``trainium-lens compare A B [FILE [FUNCTION]]``: what changed per line between two runs,
forward, backward and both (``analysis.compare.diff_runs``); ``latest~1 latest`` is the
last change to a function (``refs.py``)."""

from __future__ import annotations

import argparse
import sys

from trainium_lens.analysis.compare import diff_runs
from trainium_lens.cli.common import add_workspace_argument
from trainium_lens.cli.console import style_for
from trainium_lens.cli.outputs import write_json
from trainium_lens.cli.pipes import emit
from trainium_lens.cli.refs import back, resolve
from trainium_lens.cli.render.compare import render_diff
from trainium_lens.errors import UsageError
from trainium_lens.model.result import Result


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "compare",
        help="per-line differences between two runs",
        description="Compare two results (files, run ids or unique prefixes): per line, "
        "forward, backward and forward+backward before and after (lines matched by file, "
        "text and number), the step's totals, and the speedup on the true clock (device "
        "time, else the unprofiled wall medians).",
    )
    p.add_argument("before", metavar="A", help="the earlier run (RESULT.json, RUN_ID, latest~N)")
    p.add_argument("after", metavar="B", help="the later run (RESULT.json, RUN_ID, latest)")
    p.add_argument("file", metavar="FILE", nargs="?", help="with latest[~N]: the profiled file")
    p.add_argument("function", metavar="FUNCTION", nargs="?", help="with latest[~N]: the function")
    p.add_argument("--json", metavar="PATH", help="also write the comparison as JSON to PATH")
    add_workspace_argument(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    before = _resolve(args.before, args)
    after = _resolve(args.after, args)
    diff = diff_runs(before, after)
    emit(render_diff(diff, style_for(sys.stdout)))
    if args.json:
        try:
            write_json(args.json, diff.to_dict())
        except OSError as exc:  # the table above is printed: nothing is lost
            raise UsageError(f"cannot write {args.json}: {exc.strerror or exc}") from None
    return 0


def _resolve(ref: str, args: argparse.Namespace) -> Result:
    """FILE/FUNCTION name the function of a ``latest~N``; a run id or file stands alone."""
    if back(ref) is not None:
        return resolve(ref, args.workspace, args.file, args.function)
    return resolve(ref, args.workspace)

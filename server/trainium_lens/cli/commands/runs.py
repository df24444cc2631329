"""``trainium-lens runs [FILE [FUNCTION]]``: the stored runs, newest first.

One row per run: when (UTC), the function, backend@host, the step time on
the run's clock, the commit it measured (``+dirty``: the tree had changes),
and the run id that ``show``/``compare``/``check --baseline`` take.
"""

from __future__ import annotations

import argparse
import sys

from trainium_lens.cli.commands.profile import style_for
from trainium_lens.cli.common import add_workspace_argument, workspace_path
from trainium_lens.cli.pipes import emit
from trainium_lens.cli.refs import workspace_file
from trainium_lens.cli.render.text import Style, finish, fmt_us, table
from trainium_lens.model.result import Result
from trainium_lens.model.store import RunStore


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


def when(result: Result) -> str:
    """``2026-11-29 10:15`` (UTC, as stored) from the ISO timestamp."""
    text = result.created_at.replace("T", " ")
    return text[:16] if len(text) >= 16 else text


def listing(results: list[Result], style: Style, *, qualified: bool = True) -> list[str]:
    """The table, newest first (``results`` oldest first, as the store gives them)."""
    rows = []
    for r in reversed(results):
        name = f"{r.function.file}::{r.function.name}" if qualified else r.function.name
        rows.append(
            [
                when(r),
                name,
                f"{r.backend}@{r.host}",
                f"{fmt_us(r.totals.self_time_us, style)} {r.clock}",
                r.git.short,
                r.run_id,
            ]
        )
    width = style.width
    return table(
        ["when (UTC)", "function", "backend@host", "step", "commit", "run"],
        rows,
        "llllll",
        width=width,
        shrink={1: 12},
        ellipsis=style.ellipsis,
    )


def stored(workspace: str | None, file: str | None, function: str | None) -> tuple[RunStore, list[Result]]:
    root = workspace_path(workspace)
    store = RunStore(root)
    results = store.load_all()
    if file is not None:
        rel = workspace_file(file, root)
        results = [r for r in results if r.function.file == rel]
    if function is not None:
        results = [r for r in results if r.function.name == function]
    return store, results


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

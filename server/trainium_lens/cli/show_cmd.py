"""``trainium-lens show RESULT.json|RUN_ID``: re-print stored results.

Accepts what ``profile`` leaves behind: a ``--json`` file (one result, or a
list for several functions), a run id, or a unique prefix of one. A batch id
(the run id without its ``-N`` index) shows every function of that run and
the comparison, exactly as ``profile`` printed them.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from trainium_lens.cli.batch_render import render_batch
from trainium_lens.cli.common import add_workspace_argument, workspace_path
from trainium_lens.cli.profile_cmd import style_for
from trainium_lens.cli.render import render_result
from trainium_lens.cli.render_engines import render_engines
from trainium_lens.cli.render_ranks import render_ranks
from trainium_lens.cli.render_work import render_work
from trainium_lens.errors import LensError, UsageError
from trainium_lens.model.result import Result, ResultError, load
from trainium_lens.model.store import RunStore


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "show",
        help="re-print stored results",
        description="Print results saved by `profile` (a --json file, a run id or a unique "
        "prefix, or a batch id) as `profile` printed them.",
    )
    p.add_argument("run", metavar="RESULT.json|RUN_ID")
    add_workspace_argument(p)
    p.set_defaults(handler=run)


def load_file(path: Path) -> list[Result]:
    """One result, or the list ``profile --json`` writes for several functions."""
    try:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text)
    except OSError as exc:
        raise LensError(f"cannot read {path}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise LensError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    try:
        if isinstance(data, list):
            if not data:
                raise ResultError("an empty list")
            return [Result.from_dict(item) for item in data]
        return [load(path)]
    except ResultError as exc:
        raise LensError(f"{path}: {exc}") from None


def store_for(workspace: str | None) -> RunStore:
    root = workspace_path(workspace)
    return RunStore(root)


def resolve_many(ref: str, workspace: str | None) -> list[Result]:
    path = Path(ref).expanduser()
    if path.is_file() or ref.endswith(".json"):
        return load_file(path)
    store = store_for(workspace)
    try:
        return [store.get(ref)]
    except UsageError as err:
        if "ambiguous" not in str(err):
            raise
        batch = [r for r in store.load_all() if r.run_id.startswith(ref)]
        if len({r.batch_id for r in batch}) != 1:
            raise
        return sorted(
            batch,
            key=lambda r: int(r.run_id.rsplit("-", 1)[-1]) if r.run_id.rsplit("-", 1)[-1].isdigit() else 0,
        )


def resolve(ref: str, workspace: str | None) -> Result:
    """Exactly one result (for ``compare``)."""
    results = resolve_many(ref, workspace)
    if len(results) != 1:
        raise UsageError(f"{ref} holds {len(results)} results: name one run id")
    return results[0]


def run(args: argparse.Namespace) -> int:
    results = resolve_many(args.run, args.workspace)
    style = style_for(sys.stdout)
    sections = [
        render_result(r, style) + render_work(r, style) + render_engines(r, style) + render_ranks(r, style)
        for r in results
    ]
    sections += render_batch(results, style)  # variants compared, the rest summarized
    print("\n\n".join(sections))
    return 0

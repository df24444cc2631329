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
import json
import sys
from pathlib import Path

from trainium_lens.cli import refs
from trainium_lens.cli.commands.profile import add_verbose_argument, style_for
from trainium_lens.cli.common import add_workspace_argument, workspace_path
from trainium_lens.cli.pipes import emit
from trainium_lens.cli.render.batch import render_batch
from trainium_lens.cli.render.engines import render_engines
from trainium_lens.cli.render.ranks import render_ranks
from trainium_lens.cli.render.result import render_result
from trainium_lens.cli.render.text import finish
from trainium_lens.cli.render.work import render_work
from trainium_lens.errors import UsageError
from trainium_lens.model.codec import ResultError, refuse_constant
from trainium_lens.model.result import MAX_RESULT_BYTES, Result, load, read_regular
from trainium_lens.model.store import RunStore


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


def load_file(path: Path) -> list[Result]:
    """One result, or the list ``profile --json`` writes for several functions."""
    try:  # a regular file only, read bounded (a committed baseline may be a link to /dev/zero)
        data = json.loads(
            read_regular(path, MAX_RESULT_BYTES).decode("utf-8"), parse_constant=refuse_constant
        )
    except FileNotFoundError:
        raise UsageError(f"no such file: {path}") from None
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    except ResultError as exc:  # not a regular file (named), or NaN/Infinity in the text
        raise UsageError(str(exc) if str(exc).startswith(str(path)) else f"{path}: {exc}") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except RecursionError:
        raise UsageError(f"{path}: JSON nested too deeply to be a result") from None
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    except ValueError as exc:  # an integer past the parser's digit limit
        raise UsageError(f"{path}: {' '.join(str(exc).split())[:200]}") from None
    try:
        if isinstance(data, list):
            if not data:
                raise ResultError("an empty list")
            return [Result.from_dict(item) for item in data]
        return [load(path)]
    except ResultError as exc:
        raise UsageError(f"{path}: {exc}") from None


def store_for(workspace: str | None) -> RunStore:
    root = workspace_path(workspace)
    return RunStore(root)


def resolve_many(
    ref: str, workspace: str | None, file: str | None = None, function: str | None = None
) -> list[Result]:
    path = Path(ref).expanduser()
    if refs.back(ref) is not None and not path.is_file():
        root = workspace_path(workspace)
        rel = refs.workspace_file(file, root) if file else None
        return [refs.pick(RunStore(root), ref, rel, function)]
    if file or function:
        raise UsageError(f"FILE and FUNCTION go with latest or latest~N, not with {ref!r}")
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


def resolve(ref: str, workspace: str | None, file: str | None = None, function: str | None = None) -> Result:
    """Exactly one result (for ``compare``)."""
    results = resolve_many(ref, workspace, file, function)
    if len(results) != 1:
        raise UsageError(f"{ref} holds {len(results)} results: name one run id")
    return results[0]


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
    from trainium_lens.cli.commands.runs import listing, stored

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

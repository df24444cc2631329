"""``trainium-lens fix FILE [FUNCTION] [--only N] [--apply] [--json PATH] [--seconds S]``: measure
the fixes the latest stored run of a function offers as edits, and apply the ones
that held.

Each fix runs against the code it replaces (``engine/fixes.py``: the original
and the edited function as variants, same host, backend and inputs, outputs
compared); one row per fix says what it changes, before → after, the output
check and whether it was applied. The file is written only with ``--apply``,
only with fixes that held, after every measurement finished, and only if it
still holds what the run measured: nothing is written on a failure, a cancel
or a crash. The write goes through the one writer (``model/files.py``): one
atomic replace in the file's own encoding (its PEP 263 declaration, its BOM),
mode and owner; a file that is a link, read-only or hard-linked is refused
before anything runs, unless ``--force``.

Where it measures is the user's choice (``--host`` and its options, as for
``profile``): a run made on an SSH host is measured there only when ``--host``
names it (``--host local``: on this machine), else refused with one line naming
the host, so a committed result never sends the workspace anywhere by itself. The
copies and the driver are shipped with the job; the file is written here.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from trainium_lens.analysis.fixes.source import apply as apply_edit
from trainium_lens.cli import refs
from trainium_lens.cli.common import add_workspace_argument
from trainium_lens.cli.console import Progress
from trainium_lens.cli.outputs import write_json
from trainium_lens.cli.pipes import emit
from trainium_lens.cli.where import add_host_arguments, where_from_args
from trainium_lens.engine.fixes import (
    NOT_MEASURABLE,
    PAIRED_S,
    Measured,
    checked_edit,
    current_text,
    measure,
)
from trainium_lens.errors import LensError, UsageError
from trainium_lens.harness.markers import MAX_PAIRED_S, source_lines
from trainium_lens.model.codec import one_line
from trainium_lens.model.files import check_target, source_bytes, write_file
from trainium_lens.model.job import workspace_root_for
from trainium_lens.model.result import Edit, Finding
from trainium_lens.model.store import RunStore
from trainium_lens.targets.make import make_target
from trainium_lens.targets.where import Where

NOT_MEASURABLE_EXIT = 1  # a fix measured without a verdict: nothing of it applied


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "fix",
        help="measure the fixes a run offers, and apply the ones that held",
        description="Measure each fix the latest stored run of FILE's FUNCTION offers as an edit: "
        "the original and the edited function run as variants on the run's backend, here or on "
        "--host (a run made on a host is measured only where --host says), same inputs, outputs "
        "compared. Nothing is written without --apply; with it, only fixes measured faster with "
        "equal outputs, here.",
    )
    p.add_argument("file", metavar="FILE", help="the profiled file")
    p.add_argument("function", metavar="FUNCTION", nargs="?", help="the profiled function")
    p.add_argument("--only", type=int, metavar="N", help="measure only the N-th fix (1-based, as listed)")
    p.add_argument("--apply", action="store_true", help="write the fixes that held into FILE")
    p.add_argument("--json", metavar="PATH", help="also write the measurements as a JSON list to PATH")
    p.add_argument(
        "--force",
        action="store_true",
        help="with --apply, also replace a read-only or hard-linked FILE (its other names keep the old text)",
    )
    p.add_argument("--timeout", type=float, metavar="SECONDS", help="stop one measurement after SECONDS")
    p.add_argument(
        "--seconds",
        type=int,
        default=PAIRED_S,
        metavar="S",
        help=f"time the two versions in turn until the paired verdict is reached, for at most S seconds "
        f"(1 to {MAX_PAIRED_S}; default {PAIRED_S}); then 'not measurable on this host now' (exit 1)",
    )
    add_host_arguments(p, "measure on")
    add_workspace_argument(p)
    p.set_defaults(handler=run)


def offered(findings: list[Finding]) -> list[Finding]:
    """The findings that carry an edit, in the run's order."""
    return [f for f in findings if f.edit is not None]


def run(args: argparse.Namespace) -> int:
    if args.timeout is not None and not 0 < args.timeout < float("inf"):
        raise UsageError(f"--timeout must be a positive number of seconds, got {args.timeout:g}")
    if not 1 <= args.seconds <= MAX_PAIRED_S:
        raise UsageError(f"--seconds must be 1 to {MAX_PAIRED_S}, got {args.seconds}")
    path = Path(args.file).expanduser()
    root = (
        Path(args.workspace).expanduser().resolve() if args.workspace else workspace_root_for(path.resolve())
    )
    rel = refs.workspace_file(args.file, root)
    result = refs.pick(RunStore(root), "latest", rel, args.function)
    fixes = offered(result.findings)
    where = f"{result.function.file}::{result.function.name} (run {result.run_id})"
    if not fixes:
        print(f"no fix to measure in the latest run of {where}: no finding offers one as an edit")
        if args.json:
            write_json(args.json, [])
        return 0
    numbered = list(enumerate(fixes, 1))
    if args.only is not None:
        if not 1 <= args.only <= len(fixes):
            raise UsageError(f"--only {args.only}: the run offers {len(fixes)} fix(es), 1 to {len(fixes)}")
        numbered = [numbered[args.only - 1]]
    for n, f in numbered:  # before anything runs: a file edited since the run, or an edit
        # that is not the one the builder writes of it now (a crafted result), is refused
        checked = checked_edit(root, result, f)
        emit(shown(n, checked))  # the whole replacement, before anything runs or is written
        if args.apply:  # a file --apply could not replace is said before minutes of measuring
            check_target(root / checked.file, checked.file, force=args.force)
    target = make_target(measured_where(args, result.host))
    progress = Progress(sys.stderr)
    measured: list[Measured] = []
    try:
        for n, f in numbered:
            assert f.edit is not None
            progress.status(f"measuring fix {n}: {f.edit.title} ({f.file}:{f.edit.start_line})")
            measured.append(
                measure(
                    result,
                    f.edit,
                    n,
                    f.line,
                    root,
                    target,
                    progress,
                    timeout=args.timeout,
                    paired_s=args.seconds,
                )
            )
    finally:
        progress.close()
        target.close()
    if args.apply:
        pairs = [(m, f.edit) for m, (_n, f) in zip(measured, numbered, strict=True) if f.edit]
        write_held(root, pairs, force=args.force)
    emit("\n".join(_row(m, args.apply) for m in measured))
    if args.json:
        write_json(args.json, [_json(m) for m in measured])
    # no verdict is an answer a script must not read as "measured, not faster" (docs/cli.md)
    return NOT_MEASURABLE_EXIT if any(m.verdict == NOT_MEASURABLE for m in measured) else 0


def measured_where(args: argparse.Namespace, host: str) -> Where:
    """Where the fixes run: ``--host`` and its options; a run made on an SSH host
    without ``--host`` is refused (a stored host is a default the user confirms)."""
    where = where_from_args(args)
    if args.host is None and host not in ("", "local"):
        shown = one_line(host)[:80]
        raise UsageError(
            f"the run was measured on {shown}: pass --host {shown} (and its --ssh-config, --remote-python, "
            f"--work-dir) to measure its fixes there, or --host local to measure them on this machine"
        )
    return where


def write_held(root: Path, pairs: list[tuple[Measured, Edit]], force: bool = False) -> None:
    """Apply the edits that held, per file, last first (earlier ranges stay valid);
    one that overlaps another is left out. Each file is checked against what was
    measured once more, then replaced through the one writer (``model/files.py``)."""
    by_file: dict[str, list[tuple[Measured, Edit]]] = {}
    for m, edit in pairs:
        if m.held:
            by_file.setdefault(edit.file, []).append((m, edit))
    for file, items in by_file.items():
        text = current_text(root, items[0][1])
        items.sort(key=lambda p: (p[1].start_line, p[1].start_col), reverse=True)
        floor: tuple[int, int] | None = None
        chosen = []
        for m, edit in items:
            if floor is not None and (edit.end_line, edit.end_col) > floor:
                m.text += "; overlaps another fix: not applied"
                continue
            current_text(root, edit)  # every range, against the text as it is now
            text = apply_edit(text, edit)
            floor = (edit.start_line, edit.start_col)
            chosen.append(m)
        if chosen:
            path = root / file
            check_target(path, file, force=force)
            try:
                write_file(path, source_bytes(text, path, file), file, force=force)
            except OSError as exc:  # a full disk, a folder that refuses the new file: nothing written
                raise LensError(f"cannot write {file}: {exc.strerror or exc}; it is unchanged") from None
            for m in chosen:
                m.applied = True


def shown(n: int, edit: Edit) -> str:
    """What fix ``n`` writes, whole: its lines and every line of the replacement, each
    escaped (``codec.one_line``: control and bidi characters show as what they are)."""
    span = (
        f"line {edit.start_line}"
        if edit.start_line == edit.end_line
        else f"lines {edit.start_line}–{edit.end_line}"
    )
    body = "\n".join(f"    {one_line(part)}" for part in source_lines(edit.replacement) or [""])
    return f"fix {n}: {edit.title} replaces {edit.file} {span} with:\n{body}"


def _row(m: Measured, apply: bool) -> str:
    if m.applied:
        state = "applied"
    elif m.held and not apply:
        state = "held, not applied (--apply writes it)"
    else:
        state = "not applied"
    return f"{m.n}. {m.file}:{m.line} {m.title}: {m.text} [{state}]"


def _json(m: Measured) -> dict:
    data = m.to_dict()
    data["title"] = m.title
    return data

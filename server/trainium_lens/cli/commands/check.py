"""``trainium-lens check FILE [FUNCTION] --baseline RUN|RESULT.json``: the regression gate.

Profiles FILE's function(s) as ``profile`` does, judges each against its
baseline per function and per line (``analysis/gate/judge.py``: beyond the threshold
*and* the noise of both measurements, from their per-step samples), and exits
0 (no regression), 1 (a regression: the lines are named), 2 (cannot judge: a
baseline from another backend or kind of machine, too few steps, bad options).
While something looks slower or the host is busy it measures again
(``--confirm``) and judges the measurements together (``analysis/gate/repeat.py``).
Options may come from ``[tool.trainium-lens]`` in the workspace's pyproject.toml
(``project_config.py``); the command line wins.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import sys
from pathlib import Path
from typing import Any

from trainium_lens.analysis.gate import judge as gate
from trainium_lens.analysis.gate.repeat import combine, needs_another
from trainium_lens.cli import project_config
from trainium_lens.cli.common import PROTOCOL_HELP
from trainium_lens.cli.console import style_for
from trainium_lens.cli.outputs import OutputError, write_json
from trainium_lens.cli.pipes import emit
from trainium_lens.cli.profiling import profile_job
from trainium_lens.cli.refs import back, resolve_many
from trainium_lens.cli.render import gate as gate_output
from trainium_lens.cli.render.text import finish
from trainium_lens.cli.where import add_host_arguments
from trainium_lens.errors import LensError, UsageError
from trainium_lens.harness.spec import BACKENDS, PROTOCOL_KEYS
from trainium_lens.model.job import Job, make_job, new_batch_id, workspace_root_for
from trainium_lens.model.result import Result
from trainium_lens.model.store import RunStore

CHECK_ACTIVE = 20  # measured steps unless told: the rank test needs samples
CHECK_TIMING_CALLS = 5  # the gate judges profiled steps; the unprofiled wall is shown only
CONFIRM = 2  # measurements more, at most, while something looks slower or the host is busy


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "check",
        help="fail (exit 1) when a line or function got slower than a baseline, beyond noise",
        description="Profile FILE's function(s) and compare with a baseline run per line "
        "(forward + backward) and per function. Exit 1 when something is slower than the "
        "baseline by more than --max-regression and beyond the noise of both measurements "
        "(a rank test on their per-step samples), 0 otherwise, 2 when it cannot judge. "
        "Options may also be set in pyproject.toml under [tool.trainium-lens].",
    )
    p.add_argument("file", metavar="FILE", help="the Python file with the marked function(s)")
    p.add_argument(
        "function",
        metavar="FUNCTION",
        nargs="?",
        help="the function to check (default: every one the baseline holds)",
    )
    p.add_argument(
        "--baseline",
        metavar="RUN|RESULT.json",
        help="a stored run id (or prefix, batch id, latest~N) or a result file from `profile --json` "
        "(pyproject: baseline, relative to the workspace)",
    )
    p.add_argument("--max-regression", metavar="PCT", help="allowed slowdown per item (default 10%%)")
    p.add_argument(
        "--min-effect", metavar="PCT", help="ignore changes under this share of the step (default 3%%)"
    )
    p.add_argument("--alpha", type=float, metavar="P", help="the rank test's level (default 0.01)")
    p.add_argument(
        "--confirm",
        type=int,
        metavar="N",
        help=f"measure up to N times more while something looks slower, the host is busy or the run "
        f"was noisy, and judge "
        f"the measurements together (default {CONFIRM})",
    )
    p.add_argument("--junit", metavar="PATH", help="also write JUnit XML to PATH")
    p.add_argument("--json", metavar="PATH", help="also write this run's result(s) to PATH (a new baseline)")
    p.add_argument(
        "--backend",
        choices=BACKENDS,
        help="where the function runs (default auto; a baseline from another backend is refused)",
    )
    defaults = {"active": CHECK_ACTIVE, "timing_calls": CHECK_TIMING_CALLS}
    for key in PROTOCOL_KEYS:
        here = f"; default {defaults[key]} here" if key in defaults else ""
        p.add_argument(
            f"--{key.replace('_', '-')}", dest=key, type=int, metavar="N", help=PROTOCOL_HELP[key] + here
        )
    p.add_argument("--include", action="append", metavar="PACKAGE", help="as for profile; repeatable")
    p.add_argument("--nproc", type=int, metavar="N", help="as for profile")
    p.add_argument(
        "--workspace", metavar="DIR", help="workspace root (default: the git work tree holding FILE)"
    )
    add_host_arguments(p, "profile on")
    p.add_argument("--timeout", type=float, metavar="SECONDS", help="stop each run after SECONDS")
    p.add_argument("--no-store", action="store_true", help="do not save the runs in the workspace's store")
    p.set_defaults(handler=run)


def options(args: argparse.Namespace, config: dict) -> gate.Options:
    def pick(name: str, key: str) -> Any:
        value = getattr(args, name)
        return value if value is not None else config.get(key)

    opts = gate.Options()
    if (value := pick("max_regression", "max-regression")) is not None:
        opts.max_regression = project_config.percentage(value, "--max-regression")
    if (value := pick("min_effect", "min-effect")) is not None:
        opts.min_effect = project_config.percentage(value, "--min-effect")
    if (value := pick("alpha", "alpha")) is not None:
        if not 0 < float(value) < 0.5:
            raise UsageError(f"--alpha {value}: expected a level between 0 and 0.5 (e.g. 0.01)")
        opts.alpha = float(value)
    return opts


def bad_samples(baseline: Result) -> str | None:
    """Why ``baseline``'s figures cannot be judged against (one line), or None: a
    time is never negative, NaN or infinite (a hand-edited or crafted file)."""
    figures = [
        ("totals", baseline.totals.self_time_us),
        *(("totals step", v) for v in baseline.totals.samples),
    ]
    for line in baseline.lines:
        where = f"line {line.line}"
        figures += [(where, line.self_time_us), *((f"{where} step", v) for v in line.step_us)]
    for where, value in figures:
        if not math.isfinite(value) or value < 0:
            return f"the baseline {baseline.run_id} holds {value!r} µs for {where}: not a time"
    return None


def baselines_for(args: argparse.Namespace, config: dict, root: Path, file: str) -> list[Result]:
    """The baseline result(s) of FILE (FUNCTION's, when named)."""
    ref = args.baseline
    if ref is None and config.get("baseline"):
        ref = str(config["baseline"])
        if back(ref) is None and not Path(ref).is_absolute():
            ref = str(root / ref)  # pyproject paths are relative to the workspace
    if not ref:
        raise UsageError(
            "no baseline: pass --baseline RUN|RESULT.json or set baseline in [tool.trainium-lens]"
        )
    if back(ref) is not None:
        found = resolve_many(ref, str(root), file, args.function)
    else:
        found = resolve_many(ref, str(root))
    if args.function:
        chosen = [r for r in found if r.function.name == args.function]
    else:
        chosen = [r for r in found if r.function.file == file]
    if not chosen:
        have = ", ".join(sorted({f"{r.function.file}::{r.function.name}" for r in found}))
        want = f"{file}::{args.function}" if args.function else file
        raise UsageError(f"the baseline {ref} holds no run of {want} (it holds {have})")
    by_name = {r.function.name: r for r in chosen}  # the last of a name wins
    return list(by_name.values())


def run(args: argparse.Namespace) -> int:
    if args.timeout is not None and not 0 < args.timeout < float("inf"):
        raise UsageError(f"--timeout must be a positive number of seconds, got {args.timeout:g}")
    path = Path(args.file).expanduser().resolve()
    root = Path(args.workspace).expanduser().resolve() if args.workspace else workspace_root_for(path)
    config = project_config.load(root)
    opts = options(args, config)
    confirm = args.confirm if args.confirm is not None else int(config.get("confirm", CONFIRM))
    if confirm < 0:
        raise UsageError(f"--confirm {confirm}: expected 0 or more")
    backend = args.backend or str(config.get("backend", "auto"))
    protocol = {k: getattr(args, k) for k in PROTOCOL_KEYS if getattr(args, k) is not None}
    protocol.setdefault("active", int(config.get("active", CHECK_ACTIVE)))
    protocol.setdefault("timing_calls", CHECK_TIMING_CALLS)
    job = make_job(
        args.file,
        functions=[args.function] if args.function else [],
        backend=backend,
        protocol=protocol,
        workspace=root,
        include=(args.include or []) + list(config.get("include", [])),
        nproc=args.nproc,
    )
    baselines = baselines_for(args, config, root, job.file)
    for b in baselines:
        bad = bad_samples(b)
        if bad:
            raise UsageError(bad)
    if backend != "auto":
        for b in baselines:
            if b.backend != backend:
                raise UsageError(
                    f"the baseline {b.run_id} was measured on backend {b.backend}, and --backend "
                    f"{backend} was asked: per-line times of different backends are not comparable"
                )
    job.functions = [b.function.name for b in baselines]
    store = None if args.no_store else RunStore(root)
    results = _profiled(job, args, store)
    pairs = _pairs(baselines, results)
    measured = [results]
    for attempt in range(confirm):
        last = [gate.judge(b, a, opts) for b, a in _pairs(baselines, measured[-1])]
        if not any(needs_another(r) for r in last):
            break
        if any(r.busy for r in last):
            why = "the host was busy"
        elif any(r.noisy for r in last):
            why = "the measurement was noisy (disturbed steps): pooling more clean steps"
        else:
            why = "something looks slower"
        print(f"  measuring again ({attempt + 1} of {confirm}): {why}", file=sys.stderr)
        measured.append(_profiled(dataclasses.replace(job, batch_id=new_batch_id()), args, store))
    need = 2 if confirm else 1
    reports = []
    for b, _a in pairs:
        runs = [next(r for r in m if r.function.name == b.function.name) for m in measured]
        reports.append(combine(b, runs, opts, need))
    verdict = _report(reports, root)  # first: a path that cannot be written must not hide it
    try:
        if args.json:
            data = results[0].to_dict() if len(results) == 1 else [r.to_dict() for r in results]
            write_json(args.json, data)
        junit = args.junit or config.get("junit")
        if junit:
            gate_output.write_junit(junit if args.junit else root / str(junit), reports)
    except OutputError as err:  # the verdict is printed; the files asked for are not there: exit 2
        sys.stdout.flush()
        print(f"trainium-lens: {err}", file=sys.stderr)
        return 2
    if isinstance(verdict, CannotJudge):
        raise verdict
    return verdict


def _pairs(baselines: list[Result], results: list[Result]) -> list[tuple[Result, Result]]:
    got = {r.function.name: r for r in results}
    pairs = []
    for b in baselines:
        a = got.get(b.function.name)
        if a is None:
            raise UsageError(f"the run has no result for {b.function.name} (is it still marked?)")
        reason = gate.incompatible(b, a)
        if reason:
            raise UsageError(reason)
        pairs.append((b, a))
    return pairs


class CannotJudge(LensError):
    """The gate could not tell either way (a busy host, too few samples): exit 2."""

    exit_code = 2


def _report(reports: list[gate.Report], root: Path) -> int | CannotJudge:
    """Print; the exit status (1 on a regression), or why it cannot judge (exit 2)."""
    failed = any(r.failed for r in reports)
    blind = [r for r in reports if not r.judgeable]
    style = style_for(sys.stdout)
    text = "\n\n".join(gate_output.render(r, style) for r in reports)
    lines = [finish(text, style), ""]
    if os.environ.get("GITHUB_ACTIONS") == "true":
        lines += gate_output.github_annotations(reports, root, os.environ)
    if failed or not blind:
        lines.append(gate_output.summary(reports))
    emit("\n".join(lines))
    if failed:
        return 1
    if blind:
        return CannotJudge(f"cannot judge {blind[0].function}: {_why(blind[0])}")
    return 0


def _why(report: gate.Report) -> str:
    if report.busy:
        return (
            f"lines that did the same work as in the baseline ran {report.drift:.2g}× as long "
            f"in every measurement (a busy host, or inputs that grew): measure on a quieter host"
        )
    item = next((i for i in report.items if i.status in (gate.NOT_CONFIRMED, gate.NOT_JUDGED)), None)
    return item.reason if item else "no verdict"


def _profiled(job: Job, args: argparse.Namespace, store: RunStore | None) -> list[Result]:
    """One measurement; a run the store could not keep still counts (said on stderr)."""
    results, not_stored = profile_job(job, args, store)
    if not_stored is not None:
        print(f"trainium-lens: {not_stored} (the gate still judges this measurement)", file=sys.stderr)
    return results

"""``trainium-lens export RUN_ID [-o FILE]``: the run's trace for Perfetto UI."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from trainium_lens.cli.common import add_run_arguments, workspace_path
from trainium_lens.cli.outputs import write_output
from trainium_lens.cli.refs import resolve
from trainium_lens.cli.where import where_from_args
from trainium_lens.model.result import Result
from trainium_lens.targets.make import make_target
from trainium_lens.traces.artifacts import local_trace_path
from trainium_lens.traces.chrome import Trace, load_trace
from trainium_lens.traces.export import summarize, to_chrome_trace
from trainium_lens.traces.ranks import merged_trace


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "export",
        help="write a run's trace as Perfetto / Chrome-trace JSON",
        description="Write the trace of a stored run, with one lane for the user-line ranges, "
        "one for ATen ops and one per device stream, as Chrome-trace JSON that "
        "Perfetto UI (ui.perfetto.dev, Open trace file) and chrome://tracing open. "
        "A trace that is still on the SSH host is fetched first.",
    )
    add_run_arguments(p, ssh_config_help="ssh config file to fetch with")
    p.add_argument(
        "-o", "--output", metavar="FILE", help="where to write it (default: <run_id>.perfetto.json here)"
    )
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    result = resolve(args.run, args.workspace)
    workspace = workspace_path(args.workspace)
    where = where_from_args(args)  # --ssh-config: the host is each run's own

    def one(res: Result) -> Trace:
        return load_trace(local_trace_path(res, workspace, lambda host: make_target(where.at(host))))

    trace = merged_trace(result, one) if result.ranks else one(result)  # torchrun: every rank
    dest = Path(args.output or f"{result.run_id}.perfetto.json")
    title = f"{result.function.file}::{result.function.name} · run {result.run_id} ({result.backend})"
    document = to_chrome_trace(
        trace,
        title,
        {
            "run_id": result.run_id,
            "backend": result.backend,
            "host": result.host,
            "function": result.function.name,
            "file": result.function.file,
        },
    )
    write_output(dest, json.dumps(document, separators=(",", ":")), "-o")
    print(f"wrote {dest} ({len(trace.events)} events)")
    for line in summarize(trace):
        print(f"  {line}")
    print("open it in Perfetto UI (https://ui.perfetto.dev, Open trace file) or chrome://tracing")
    return 0

"""``trainium-lens doctor [--host HOST]``: can this target profile, and what to fix."""

from __future__ import annotations

import argparse
import json
import sys

from trainium_lens.cli.common import add_target_arguments
from trainium_lens.hosttools.doctor.run import run_doctor

_MARKS = {"pass": "PASS", "warn": "WARN", "fail": "FAIL", "skip": "skip"}


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "doctor",
        help="check a target (SSH, Python, torch, Neuron) and say what to fix",
        description="Check that a target can profile: SSH (reachable, host key, auth), "
        "Python, torch, torch-neuronx flavour, the Neuron profiling API, "
        "devices, neuron-explorer, free disk and the instance type.",
    )
    add_target_arguments(p, "check")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    report = run_doctor(
        args.host,
        ssh_config=args.ssh_config,
        remote_python=args.remote_python,
        work_dir=args.work_dir,
        python=args.python,
    )
    if args.json:
        json.dump(report.to_dict(), sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        width = max(len(c.title) for c in report.checks)
        print(f"trainium-lens doctor: {report.host}")
        for check in report.checks:
            print(f"  {_MARKS[check.status]}  {check.title:<{width}}  {check.detail}")
            if check.fix and check.status in ("fail", "warn"):
                print(f"        {'':<{width}}  fix: {check.fix}")
        failed = [c.title for c in report.checks if c.status == "fail"]
        print("all checks pass" if not failed else f"{len(failed)} failed: {', '.join(failed)}")
    return 0 if report.ok else 4  # the host cannot run what failed

"""``trainium-lens doctor [--host HOST]``: can this target profile, and what to fix."""

from __future__ import annotations

import argparse
import json
import sys

from trainium_lens.cli.where import add_host_arguments, add_nodes_arguments, where_from_args
from trainium_lens.hosttools.doctor.report import Report
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
    add_host_arguments(p, "check")
    add_nodes_arguments(p, job=False)
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    where = where_from_args(args)
    if where.hosts or where.slurm:
        from trainium_lens.hosttools.doctor.nodes import doctor_hosts, doctor_slurm

        reports = doctor_hosts(where) if where.hosts else doctor_slurm(where)
        if args.json:
            json.dump([r.to_dict() for r in reports], sys.stdout, indent=1)
            sys.stdout.write("\n")
        else:
            for report in reports:
                _print(report)
        return 0 if all(r.ok for r in reports[-1:]) and all(_reachable(r) for r in reports) else 1
    report = run_doctor(where)
    if args.json:
        json.dump(report.to_dict(), sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        _print(report)
    return 0 if report.ok else 4  # the host cannot run what failed


def _reachable(report: Report) -> bool:
    check = report.get("ssh")
    return check is None or check.status == "pass"


def _print(report: Report) -> None:
    width = max(len(c.title) for c in report.checks)
    print(f"trainium-lens doctor: {report.host}")
    for check in report.checks:
        print(f"  {_MARKS[check.status]}  {check.title:<{width}}  {check.detail}")
        if check.fix and check.status in ("fail", "warn"):
            print(f"        {'':<{width}}  fix: {check.fix}")
    failed = [c.title for c in report.checks if c.status == "fail"]
    print("all checks pass" if not failed else f"{len(failed)} failed: {', '.join(failed)}")

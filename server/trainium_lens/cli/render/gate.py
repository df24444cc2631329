"""What ``check`` says: a table for people, JUnit XML for CI dashboards, and
GitHub Actions annotations so a slower line shows on the pull request's diff.

All three are read off ``analysis.gate.Report``s; none judges anything.
"""

from __future__ import annotations

import math
import os
import re
import socket
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from pathlib import Path

from trainium_lens.analysis.gate.judge import (
    FASTER,
    NEW,
    NOT_CONFIRMED,
    NOT_JUDGED,
    OK,
    REGRESSED,
    WITHIN_NOISE,
    Item,
    Report,
)
from trainium_lens.cli.outputs import write_output
from trainium_lens.cli.render.text import Style, fmt_us, table, truncate
from trainium_lens.model import figures

SHOWN = (REGRESSED, NEW, NOT_CONFIRMED, WITHIN_NOISE, NOT_JUDGED)


def _change(item: Item) -> str:
    if item.change is None and item.status == NEW:
        return "new"
    return _pct(item.change)


def _pct(change: float | None) -> str:
    if change is None:
        return "-"
    if math.isinf(change):
        return "+inf"
    return ("+" if change > 0 else "") + figures.pct(change * 100)


def _name(item: Item, report: Report) -> str:
    if item.kind == "function":
        return f"{report.function} (whole step)"
    where = str(item.line) if item.file == report.file else f"{item.file}:{item.line}"
    return f"{where}  {item.text.strip()}"


def _verdict(item: Item) -> str:
    words = item.status.upper() if item.status == REGRESSED else item.status
    return words + (f"  p={item.p:.2g}" if item.p is not None else "")


def render(report: Report, style: Style) -> str:
    """The report of one function: the whole step, then every line worth a word."""
    o = report.options
    arrow = "→" if style.unicode else "->"
    head = [
        f"check {report.file}::{report.function}  against {report.baseline} "
        f"({report.baseline_where}, commit {report.baseline_commit})",
        f"  this run {report.run} (commit {report.run_commit}); before/after = median of the clean steps "
        f"(within {o.clean:g}× of the fastest), {report.clock} clock; threshold +{o.max_regression:.0%}, "
        f"min effect {o.min_effect:.0%} of the step, rank test at p < {o.alpha:g}"
        + (f"; {report.measurements} measurements" if report.measurements > 1 else ""),
    ]
    if report.drift is not None:
        if report.busy:
            how = " (too changed to judge)"
        elif report.drift > 1:
            how = f"; items judged against baseline × {report.drift:.2f} (the 'judged' column)"
        else:
            how = "; items judged against the baseline as it is"
        head.append(
            f"  host: the unchanged lines ran {figures.ratio(report.drift)} as long as in the baseline{how}"
        )
    head += [f"  note: {n}" for n in report.notes]
    shown = [i for i in report.items if i.kind == "function" or i.status in SHOWN]
    rows = [
        [
            truncate(_name(i, report), 60, style),
            fmt_us(i.before_us, style),
            arrow,
            fmt_us(i.after_us, style),
            _change(i),
            _pct(i.judged_change) if i.before_us is not None else "",
            _verdict(i),
        ]
        for i in shown
    ]
    body = table(
        ["", "before", "", "after", "change", "judged", "verdict"],
        rows,
        "lrlrrrl",
        width=style.width,
        shrink={0: 20},
        ellipsis=style.ellipsis,
    )
    quiet = [i for i in report.items if i.kind == "line" and i.status in (OK, FASTER)]
    tail = [f"  {len(quiet)} other line(s) within the threshold or faster"] if quiet else []
    for item in shown:
        if item.status in (NOT_JUDGED, NOT_CONFIRMED):
            tail.append(f"  {_name(item, report)[:50]}: {item.reason}")
    return "\n".join(head + [""] + body + tail)


def summary(reports: list[Report]) -> str:
    o = reports[0].options if reports else None
    bad = [i for r in reports for i in r.regressions]
    if bad and o:
        names = ", ".join(
            (f"line {i.line}" if i.kind == "line" else f"{r.function} (step)")
            for r in reports
            for i in r.regressions
        )
        return f"FAIL: {len(bad)} regression(s) beyond +{o.max_regression:.0%} and the noise: {names}"
    judged = sum(1 for r in reports for i in r.items if i.status not in (NOT_JUDGED, NEW))
    limit = f"+{o.max_regression:.0%}" if o else "the threshold"
    return f"PASS: no regression beyond {limit} and the noise ({judged} item(s) judged)"


# -- JUnit XML ---------------------------------------------------------------------


def _case_name(item: Item, report: Report) -> str:
    return "whole step" if item.kind == "function" else _name(item, report)


def junit_xml(reports: list[Report]) -> str:
    """One testsuite per function, one testcase per judged item: a regression is a
    ``failure``, an item that could not be judged ``skipped`` with the reason."""
    suites = ET.Element("testsuites", name="trainium-lens check")
    totals = {"tests": 0, "failures": 0, "skipped": 0}
    stamp = datetime.now(UTC).isoformat(timespec="seconds")
    for report in reports:
        cases = [i for i in report.items if i.status != NEW]
        failures = [i for i in cases if i.status == REGRESSED]
        skipped = [i for i in cases if i.status == NOT_JUDGED]
        suite = ET.SubElement(
            suites,
            "testsuite",
            name=f"{report.file}::{report.function}",
            tests=str(len(cases)),
            failures=str(len(failures)),
            errors="0",
            skipped=str(len(skipped)),
            timestamp=stamp,
            hostname=socket.gethostname(),
        )
        props = ET.SubElement(suite, "properties")
        for key, value in (
            ("baseline", report.baseline),
            ("baseline_commit", report.baseline_commit),
            ("baseline_where", report.baseline_where),
            ("run", report.run),
            ("run_commit", report.run_commit),
            ("clock", report.clock),
            ("max_regression", f"{report.options.max_regression:g}"),
            ("alpha", f"{report.options.alpha:g}"),
        ):
            ET.SubElement(props, "property", name=key, value=value)
        for item in cases:
            case = ET.SubElement(
                suite,
                "testcase",
                classname=f"{report.file}::{report.function}",
                name=_case_name(item, report),
                file=item.file,
                line=str(item.line),
                time=f"{(item.after_us or 0.0) / 1e6:.6f}",
            )
            message = (
                f"{fmt_us(item.before_us)} -> {fmt_us(item.after_us)} {report.clock} per step "
                f"({_change(item)}): {item.reason}"
            )
            if item.status == REGRESSED:
                ET.SubElement(case, "failure", type="regression", message=message).text = message
            elif item.status == NOT_JUDGED:
                ET.SubElement(case, "skipped", message=message)
            else:
                ET.SubElement(case, "system-out").text = message
        for key in totals:
            totals[key] += int(suite.get(key, "0"))
    for key, count in totals.items():
        suites.set(key, str(count))
    suites.set("errors", "0")
    ET.indent(suites)
    text = ET.tostring(suites, encoding="unicode")
    # characters XML 1.0 forbids (ElementTree escapes markup, not these): dropped
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + _XML_FORBIDDEN.sub("", text) + "\n"


_XML_FORBIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def write_junit(path: str | os.PathLike, reports: list[Report]) -> None:
    write_output(path, junit_xml(reports), "--junit")


# -- GitHub Actions annotations ------------------------------------------------------


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def repo_path(file: str, workspace: Path, environ: dict | os._Environ) -> str:
    """``file`` (relative to the workspace) as the repository names it: GitHub places
    annotations by a path relative to ``GITHUB_WORKSPACE`` (the checkout)."""
    checkout = environ.get("GITHUB_WORKSPACE")
    if checkout:
        try:
            return (workspace / file).resolve().relative_to(Path(checkout).resolve()).as_posix()
        except ValueError:
            pass
    return file


def github_annotations(reports: list[Report], workspace: Path, environ: dict | os._Environ) -> list[str]:
    """``::error file=…,line=…,title=…::message`` per regression (GitHub's workflow
    command syntax); ``::warning`` for an item that could not be judged."""
    out = []
    for report in reports:
        for item in report.items:
            if item.status not in (REGRESSED, NOT_JUDGED):
                continue
            level = "error" if item.status == REGRESSED else "warning"
            what = "line" if item.kind == "line" else "step"
            title = f"Trainium Lens: {report.function} {what} slower than the baseline"
            message = (
                f"{item.text.strip()}: {fmt_us(item.before_us)} -> {fmt_us(item.after_us)} "
                f"{report.clock} per step ({_change(item)}) vs {report.baseline} "
                f"(commit {report.baseline_commit}): {item.reason}"
            )
            props = (
                f"file={_escape_property(repo_path(item.file, workspace, environ))},"
                f"line={item.line},title={_escape_property(title)}"
            )
            out.append(f"::{level} {props}::{_escape_data(message)}")
    return out

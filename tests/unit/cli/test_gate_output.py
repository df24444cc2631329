"""What check writes: JUnit XML read back by a JUnit reader (junitparser, as CI
dashboards read it), GitHub's workflow-command annotations, the options file."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from junitparser import Failure, JUnitXml, Skipped

from tests.unit.analysis.test_gate import OPS, TEXTS, base_lines, run
from trainium_lens.analysis.gate import judge as gate
from trainium_lens.cli import project_config
from trainium_lens.cli.render import gate as gate_output
from trainium_lens.errors import UsageError


def reports() -> list[gate.Report]:
    rng = random.Random(2)
    ops = {**OPS, 16: ["aten::mm", "aten::mm"]}
    texts = {**TEXTS, 16: "h = h @ w2 @ w3  # 50%, a comma: and a colon"}
    slow = gate.judge(run(base_lines(rng)), run(base_lines(rng, mm2=2.0), "r-1", ops=ops, texts=texts))
    fine = gate.judge(run(base_lines(rng)), run(base_lines(rng), "r-2"))
    fine.function = "other"
    return [slow, fine]


def test_junit_xml_reads_back_with_a_junit_parser(tmp_path):
    path = tmp_path / "reports" / "lens.xml"
    gate_output.write_junit(path, reports())
    xml = JUnitXml.fromfile(str(path))
    suites = list(xml)
    assert [s.name for s in suites] == ["model.py::block", "model.py::other"]
    slow = suites[0]
    assert slow.tests == 5 and slow.failures == 2 and slow.errors == 0
    failed = {case.name: case for case in slow if any(isinstance(r, Failure) for r in case.result)}
    assert set(failed) == {"whole step", "16  h = h @ w2 @ w3  # 50%, a comma: and a colon"}
    failure = next(r for r in failed["whole step"].result if isinstance(r, Failure))
    assert failure.type == "regression" and "beyond the noise" in failure.message
    assert suites[1].failures == 0 and suites[1].tests == 5
    props = {p.name: p.value for p in slow.properties()}
    assert props["baseline"] == "r-0" and props["run"] == "r-1" and props["max_regression"] == "0.1"


def test_junit_marks_unjudged_items_skipped(tmp_path):
    before = {16: [400.0, 410.0], 17: [100.0, 101.0]}
    after = {16: [900.0, 910.0], 17: [100.0, 101.0]}
    report = gate.judge(run(before), run(after, "r-1", ops={16: ["aten::mm", "aten::mm"]}))
    path = tmp_path / "lens.xml"
    gate_output.write_junit(path, [report])
    (suite,) = list(JUnitXml.fromfile(str(path)))
    skipped = [c for c in suite if any(isinstance(r, Skipped) for r in c.result)]
    assert skipped and suite.skipped == len(skipped) and suite.failures == 0


def test_github_annotations_name_the_file_and_line(tmp_path):
    workspace = tmp_path / "repo" / "sub"
    lines = gate_output.github_annotations(reports(), workspace, {"GITHUB_WORKSPACE": str(tmp_path / "repo")})
    assert len(lines) == 2
    step, line = lines
    assert step.startswith("::error file=sub/model.py,line=14,title=Trainium Lens%3A block step slower")
    assert line.startswith("::error file=sub/model.py,line=16,title=")
    message = line.split("::", 2)[2]
    assert "h = h @ w2 @ w3  # 50%25, a comma: and a colon" in message  # data: % escaped, : kept
    assert "\n" not in line
    # outside a checkout: the path as results name it
    assert gate_output.github_annotations(reports(), workspace, {})[1].startswith(
        "::error file=model.py,line=16"
    )


def test_the_text_report_names_the_line_before_and_after():
    text = gate_output.render(reports()[0], gate_output.Style(unicode=False))
    row = next(ln for ln in text.splitlines() if ln.lstrip().startswith("16 "))
    assert "h = h @ w2 @ w3" in row and "->" in row and "REGRESSED" in row
    assert gate_output.summary(reports()).startswith("FAIL: 2 regression(s) beyond +10% and the noise")


def test_pyproject_options(tmp_path: Path):
    assert project_config.load(tmp_path) == {}
    (tmp_path / "pyproject.toml").write_text(
        '[tool.trainium-lens]\nbaseline = "perf/base.json"\nmax-regression = "5%"\nactive = 30\n'
    )
    assert project_config.load(tmp_path) == {
        "baseline": "perf/base.json",
        "max-regression": "5%",
        "active": 30,
    }
    assert project_config.percentage("5%", "x") == pytest.approx(0.05)
    assert project_config.percentage(12, "x") == pytest.approx(0.12)
    (tmp_path / "pyproject.toml").write_text('[tool.trainium-lens]\nmax-regresion = "5%"\n')
    with pytest.raises(UsageError, match="unknown key.*max-regresion"):
        project_config.load(tmp_path)
    (tmp_path / "pyproject.toml").write_text("[tool.trainium-lens]\nactive = true\n")
    with pytest.raises(UsageError, match="active = True: expected a number of steps"):
        project_config.load(tmp_path)
    with pytest.raises(UsageError, match="expected a percentage"):
        project_config.percentage("ten", "--max-regression")

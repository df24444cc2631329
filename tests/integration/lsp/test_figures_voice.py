"""One voice for numbers: the same figure reads the same in a finding, a hover, an
inlay hint, the CLI and the results panel. The result is stored through the real
``RunStore``; the hover and hints come from the real server over LSP, the CLI is
the real ``trainium-lens show`` and the panel is the client's own page code
(extension/src/panel/html.ts, bundled with esbuild and run by node) fed the
server's ``trainiumLens/runData`` reply."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from tests.conftest import ROOT
from tests.support.lsp_client import hints, hover, make_result, open_doc, request, start, stop
from trainium_lens.analysis.findings.analyze import analyze
from trainium_lens.model import figures
from trainium_lens.model.result import H2DCopy
from trainium_lens.model.store import RunStore

ESBUILD = ROOT / "node_modules" / ".bin" / "esbuild"
SAMPLES = {
    v: text for v, text in json.loads((ROOT / "tests/data/figure_samples.json").read_text())["time_us"]
}

SOURCE = textwrap.dedent("""\
    import torch


    # trainium: profile
    def f(x):
        y = x * 2
        z = y.sum()
        return torch.cat([z, z])
""")
# line -> self µs: the sample times that read four ways before (hover "0 µs", CLI
# "0.00 µs", finding "0.004 µs", roofline "4 ns"; "2.5 µs" beside "2.50 µs")
TIMES = {6: 2.5, 7: 0.004, 8: 1160.0}

RENDER = """
const { renderBody } = require(process.argv[1]);
const data = JSON.parse(require("node:fs").readFileSync(0, "utf8"));
process.stdout.write(renderBody(data));
"""


def panel_html(tmp_path, data: dict) -> str:
    if not ESBUILD.exists():
        pytest.fail("run 'npm ci' first: the panel's code is bundled with esbuild")
    bundle = tmp_path / "html.cjs"
    built = subprocess.run(
        [ESBUILD, ROOT / "extension/src/panel/html.ts", "--bundle", "--platform=node", f"--outfile={bundle}"],
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stderr
    done = subprocess.run(
        ["node", "-e", RENDER, bundle], input=json.dumps(data), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def workspace(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "mod.py").write_text(SOURCE)
    lines = {line: (SOURCE.splitlines()[line - 1], us, [("aten::mul", 1, us)]) for line, us in TIMES.items()}
    result = make_result("mod.py", "f", 5, lines)
    # a host→device copy on line 6 costing its whole time: the finding names the figure
    result.signals.h2d_copies = [H2DCopy(file="mod.py", line=6, calls=1.0, self_time_us=2.5)]
    result.findings = analyze(result)
    RunStore(ws).save(result)
    return ws


async def test_a_figure_reads_the_same_in_a_finding_a_hover_a_hint_the_cli_and_the_panel(tmp_path, workspace):
    expected = {line: figures.time_us(us) for line, us in TIMES.items()}
    assert expected == {line: SAMPLES[us] for line, us in TIMES.items()}  # the shared table's text
    assert expected == {6: "2.5 µs", 7: "4 ns", 8: "1.16 ms"}

    result = RunStore(workspace).latest("mod.py", "f")
    copy = next(f for f in result.findings if f.kind == "h2d_copy")
    assert f"(1 per call, {expected[6]})" in copy.message

    client = await start(workspace)
    try:
        uri = open_doc(client, workspace / "mod.py")
        shown_hints = await hints(client, uri)
        for line, text in expected.items():
            assert shown_hints[line - 1].startswith(f"⏱ {text} cpu"), shown_hints[line - 1]
            assert f"self **{text} cpu**" in (await hover(client, uri, line - 1) or "")
        data = await request(client, "trainiumLens/runData", {"uri": uri})
    finally:
        await stop(client)

    env = {**os.environ, "PYTHONPATH": str(ROOT / "server"), "PYTHONIOENCODING": "utf-8"}
    shown = subprocess.run(
        [
            sys.executable,
            "-m",
            "trainium_lens",
            "show",
            "latest",
            "mod.py",
            "f",
            "--workspace",
            str(workspace),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=workspace,
    )
    assert shown.returncode == 0, shown.stderr
    rows = {int(ln.split()[0]): ln for ln in shown.stdout.splitlines() if ln[:6].strip().isdigit()}
    for line, text in expected.items():
        assert f" {text} " in rows[line] + " ", rows[line]

    lines_table = panel_html(tmp_path, data).split('<table id="lines">')[1].split("</table>")[0]
    for line, text in expected.items():
        row = next(r for r in lines_table.split("<tr ") if f'data-line="{line}">' in r)
        assert f'<td class="num">{text}</td>' in row, row

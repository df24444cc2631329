"""A line's history in its hover and "Compare with Baseline", over real LSP: the
server as a subprocess (pytest-lsp), runs stored through the real RunStore with
the commits they measured, as profile leaves them."""

from __future__ import annotations

import pytest

from tests.integration.lsp.test_features import LINES, SOURCE
from tests.support.lsp_client import hover, make_result, open_doc, request, start, stop
from trainium_lens.model.result import GitState
from trainium_lens.model.store import RunStore

# the mul line (7) in four runs: 30, 15, 45, 20 µs; each run at its own commit
MUL = [30.0, 15.0, 45.0, 20.0]
COMMITS = ["1111111aaaa", "2222222bbbb", "3333333cccc", "4444444dddd"]


@pytest.fixture
def workspace(tmp_path):
    (tmp_path / "mod.py").write_text(SOURCE)
    store = RunStore(tmp_path)
    for i, (us, commit) in enumerate(zip(MUL, COMMITS, strict=True)):
        lines = dict(LINES)
        lines[7] = (LINES[7][0], us, LINES[7][2])
        result = make_result(
            "mod.py", "f", 5, lines, run_id=f"20261130-10{i}000-aaaa-0", created_at=f"2026-11-30T10:{i}0:00Z"
        )
        result.git = GitState(commit=commit, dirty=i == 3, branch="main")
        store.save(result)
    return tmp_path


async def test_hover_shows_the_lines_recent_runs_with_commits_and_a_sparkline(workspace):
    client = await start(workspace)
    try:
        uri = open_doc(client, workspace / "mod.py")
        text = await hover(client, uri, 6)  # 0-based: the mul line
        assert "**history** (last 4 runs, oldest → newest): `▅▁█▂`" in text
        rows = [ln for ln in text.splitlines() if ln.startswith("| 2026")]
        assert rows[0] == "| 2026-11-30 10\\:30 | `4444444+dirty` | 20 µs cpu ← this run |"
        assert rows[-1] == "| 2026-11-30 10\\:00 | `1111111` | 30 µs cpu |"
    finally:
        await stop(client)


async def test_compare_with_baseline_lists_runs_and_diffs_against_the_one_picked(workspace):
    client = await start(workspace)
    try:
        uri = open_doc(client, workspace / "mod.py")
        listed = await request(client, "trainiumLens/history", {"uri": uri})
        assert listed["function"] == "f"
        assert [r["commit"][:7] for r in listed["runs"]] == ["4444444", "3333333", "2222222", "1111111"]
        assert listed["runs"][0]["dirty"] is True and listed["runs"][0]["step_us"] == pytest.approx(90.0)
        picked = listed["runs"][-1]["run_id"]  # the oldest: 30 µs on the mul line
        data = await request(client, "trainiumLens/runData", {"uri": uri, "baseline": picked})
        assert data["diff"]["before"] == picked and data["diff"]["after"] == listed["runs"][0]["run_id"]
        assert "| 7 | `y = x * x` | 30 µs | 20 µs | ▼ 33% |" in data["markdown"]["diff"]
        default = await request(client, "trainiumLens/runData", {"uri": uri})
        assert default["diff"]["before"] == listed["runs"][1]["run_id"]  # the previous run, as before
        nothing = await request(client, "trainiumLens/history", {"uri": uri.replace("mod.py", "nope.py")})
        assert nothing["runs"] == []
    finally:
        await stop(client)

"""The roofline where people look, over real LSP: the hint's marker, the hover's
work/roofline/memory section (stored strings escaped), and the panel's
``roofline`` data. Stored results as a profile run leaves them (synthetic
figures: tests/integration/harness/test_work.py makes real ones)."""

from __future__ import annotations

import textwrap

import pytest

from tests.support.lsp_client import hints, hover, make_result, open_doc, request, start, stop
from trainium_lens.lsp.present.markdown import escape
from trainium_lens.model.evidence import Memory, PeakFlops, Roof, Work
from trainium_lens.model.store import RunStore

SOURCE = textwrap.dedent("""\
    import torch


    # trainium: profile
    def f(x):
        a = x + 1
        y = a @ a
        z = torch.tanh(y) * 2
        return z
""")
LINES = {
    6: ("    a = x + 1", 10.0, [("aten::add", 1, 10.0)]),
    7: ("    y = a @ a", 100.0, [("aten::mm", 1, 100.0)]),
    8: ("    z = torch.tanh(y) * 2", 100.0, [("aten::tanh", 1, 50.0), ("aten::mul", 1, 50.0)]),
}


@pytest.fixture
def workspace(tmp_path):
    (tmp_path / "mod.py").write_text(SOURCE)
    r = make_result("mod.py", "f", 5, LINES)
    work = {6: (0.0, 100.0), 7: (5e6, 1e3), 8: (0.0, 5e5)}  # line -> (FLOPs, bytes) per call
    for s in r.lines:
        s.flops, s.bytes = work[s.line]
        s.backward_flops = s.backward_bytes = 0.0
        s.dtype = "float32"
        s.saved_bytes, s.peak_bytes = 3 * 2**20, 2**20
    r.roof = Roof(
        device="Test CPU [x](command:evil)",
        flops=[PeakFlops("float32", 1e11)],
        bytes_per_s=1e10,
        source="measured on this host, cached",
        measured=True,
    )
    r.work = Work(source="shapes", flops=5e6, bytes=5.011e5)
    r.memory = Memory(device="cpu", available=True, peak_bytes=4 * 2**20, peak_phase="backward")
    RunStore(tmp_path).save(r)
    return tmp_path


async def test_hint_markers_hover_section_and_panel_data(workspace):
    client = await start(workspace)
    try:
        uri = open_doc(client, workspace / "mod.py")
        shown = await hints(client, uri)
        assert shown[6].endswith("· 50% peak")  # 5 MFLOP in 100 µs against 100 GFLOP/s
        assert shown[7].endswith("· mem-bound")  # 500 kB in 100 µs against 10 GB/s: 50% BW
        assert shown[5].endswith("· overhead")  # 100 bytes in 10 µs
        assert all(len(h) <= 43 for h in shown.values())  # VS Code's default cut

        text = await hover(client, uri, 6)
        assert "**Work and roofline**" in text
        assert "| forward | 5 MFLOP | 1000 B | 100 µs cpu | 50 GFLOP/s |" in text
        assert "50% FLOP/s | compute-bound |" in text
        assert "measured on this host" in text
        assert "](command:evil)" not in text and escape("[x](command:evil)") in text  # escaped
        assert "saves 3 MiB for backward" in text and "1 MiB live at the step's peak" in text

        data = await request(client, "trainiumLens/runData", {"uri": uri})
        roofline = data["roofline"]
        assert roofline["roof"]["measured"] is True
        assert {(p["line"], p["verdict"]) for p in roofline["points"]} == {
            (6, "overhead-bound"),
            (7, "compute-bound"),
            (8, "memory-bound"),
        }
        assert roofline["mfu"]["basis"] == "unprofiled wall time"
        assert roofline["memory"]["peak_bytes"] == 4 * 2**20
    finally:
        await stop(client)

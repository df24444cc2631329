"""Work per line on torch-xla's CPU device: the FLOPs of a ``dot`` (and a batched
dot, a convolution) match their shapes; bytes and HLO buffer sizes are filled.
Needs the torch-xla venv (skipped without it, as the other xla tests)."""

from __future__ import annotations

import pytest

from tests.conftest import ROOT, needs_xla
from tests.support.harness import line_of, profile_xla

DATA = ROOT / "tests" / "data"
FILE = DATA / "xla_work.py"
B, M, K, N = 3, 40, 24, 56


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    return profile_xla(tmp_path_factory.mktemp("xla-work") / "r.json", str(FILE), "shapes")


def _line(result, needle: str) -> dict:
    number = line_of(FILE, needle)
    found = [s for s in result["lines"] if s["line"] == number]
    assert found, (needle, [s["line"] for s in result["lines"]])
    return found[0]


@needs_xla
def test_dot_flops_match_their_shapes(result):
    assert result["work"]["source"] == "hlo"
    dot = _line(result, "y = x @ w")
    assert dot["flops"] == 2 * M * N * K
    assert dot["dtype"] == "float32"
    assert dot["bytes"] >= (M * K + K * N + M * N) * 4  # at least the dot's operands and result
    assert _line(result, "yb = torch.bmm")["flops"] == 2 * B * M * N * K
    # conv: 2 × batch × output points × output channels × (input channels × 3 × 3). XLA's
    # CPU pipeline drops the convolution's metadata: the line mapping gives it to the line
    # that reads its result; its FLOPs go where its time goes.
    conv = 2 * 2 * 10 * 10 * 8 * (3 * 3 * 3)
    held = [s for s in result["lines"] if any(i["opcode"] == "convolution" for i in s["instructions"])]
    assert len(held) == 1 and held[0]["flops"] == conv
    assert result["work"]["flops"] == 2 * M * N * K + 2 * B * M * N * K + conv


@needs_xla
def test_hlo_buffers_and_the_roof(result):
    dot = _line(result, "y = x @ w")
    assert dot["alloc_bytes"] >= M * N * 4  # its result buffer
    memory = result["memory"]
    assert memory["source"].startswith("the compiled module's buffer assignment")
    # the heap simulation's peak is the sum of what is live there, line by line
    live = sum(s["peak_bytes"] for s in result["lines"]) + memory["unattributed_peak_bytes"]
    assert memory["peak_bytes"] > 0 and live == memory["peak_bytes"]
    assert memory["held_before_bytes"] >= (M * K + K * N) * 4  # the inputs are parameters
    roof = result["roof"]  # torch-xla's CPU device runs on this host: its measured roof
    assert roof["measured"] and "measured on this host" in roof["source"]

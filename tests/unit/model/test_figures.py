"""``model/figures``: one voice for every figure. The sample table is shared with the
extension's unit tests (extension/test/figures.test.ts), so both sides read it."""

from __future__ import annotations

import json

import pytest

from tests.conftest import ROOT
from trainium_lens.model import figures

SAMPLES = json.loads((ROOT / "tests" / "data" / "figure_samples.json").read_text(encoding="utf-8"))

KINDS = {
    "time_us": figures.time_us,
    "bytes": figures.nbytes,
    "flops": figures.flops,
    "flops_rate": figures.flops_rate,
    "bandwidth": figures.bandwidth,
    "pct": figures.pct,
    "count": figures.count,
    "ratio": figures.ratio,
}


def test_the_sample_table_names_every_kind():
    assert set(SAMPLES) - {"_about"} == set(KINDS)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_each_sample_reads_as_the_table_says(kind):
    got = [[value, KINDS[kind](value)] for value, _ in SAMPLES[kind]]
    assert got == SAMPLES[kind]


def test_the_rule_in_words():
    # the cases the old formatters disagreed on: "0 µs", "0.00 µs", "0.004 µs", "4 ns"
    assert figures.time_us(0.004) == "4 ns"
    # and "2.50 µs" in the CLI beside "2.5 µs" in a hover
    assert figures.time_us(2.5) == "2.5 µs"
    # a figure that rounds up to the next unit takes it
    assert figures.time_us(999.7) == "1 ms"
    # a tie rounds up, as JavaScript's toFixed does on the same double
    assert figures.pct(12.5) == "13%" and figures.time_us(1.125) == "1.13 µs"


def test_shown_puts_the_text_beside_each_figure_and_keeps_the_payload():
    payload = {
        "totals": {"self_time_us": 2.5, "steps": 5, "note": "x"},
        "lines": [{"line": 3, "self_time_us": 0.004, "calls": 2.3333, "peak_bytes": 4194304}],
        "roof": {"bytes_per_s": 18.4e9, "flops": [{"dtype": "bf16", "flops_per_s": 91.75e12}]},
        "flag": True,
    }
    before = json.dumps(payload, sort_keys=True)
    out = figures.shown(payload)
    assert json.dumps(payload, sort_keys=True) == before
    assert out["totals"]["shown"] == {"self_time_us": "2.5 µs", "steps": "5"}
    assert out["lines"][0]["shown"] == {"self_time_us": "4 ns", "calls": "2.33", "peak_bytes": "4 MiB"}
    assert out["roof"]["shown"] == {"bytes_per_s": "18.4 GB/s"}
    assert out["roof"]["flops"][0]["shown"] == {"flops_per_s": "91.8 TFLOP/s"}
    assert "shown" not in out and out["lines"][0]["line"] == 3  # a line number is no figure

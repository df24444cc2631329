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


def test_zero_has_one_path_and_no_figure_reads_with_an_exponent():
    # a line's host time bounded by the wall left a float residue: it read "host 2.49E-11 ns"
    assert figures.time_us(2.49e-14) == figures.time_us(-3e-15) == figures.time_us(0) == "0 µs"
    assert figures.is_zero_time(2.49e-14) and figures.is_zero_time(None) and not figures.is_zero_time(0.0004)
    for value in (1e-7, 2.49e-11, 3.3e-9):
        assert "E" not in figures.number(value) and "e" not in figures.number(value)
    assert figures.number(1e-7) == "0.0000001"


def test_a_residue_of_host_time_is_not_shown_as_host_time():
    from tests.unit.analysis.test_noise_and_reconcile import QUIET, _result
    from trainium_lens.cli.render.result import render_result
    from trainium_lens.lsp.present.trust import host_text

    r = _result(13.9, 16.1, stability=QUIET, host=2.49e-14)
    r.lines[0].host_time_us = 2.49e-14
    assert host_text(r.lines[0], r) is None
    text = render_result(r)
    assert "E-" not in text and "host" not in text.split("\n  line ")[1].splitlines()[0]

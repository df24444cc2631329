"""lsp/present/roofline_chart.py: the results panel's roofline payload, on results
built by hand (tests/unit/analysis/test_roofline.py's builders)."""

from __future__ import annotations

from tests.unit.analysis.test_roofline import line, result
from trainium_lens.lsp.present.roofline_chart import chart
from trainium_lens.model.result import Result


def test_chart_payload():
    mem = {"available": True, "peak_bytes": 2**20, "peak_phase": "forward", "device": "cpu"}
    r = result([line(3, us=1000.0, flops=5e7, bytes_=1e5, peak_bytes=2**19)], memory=mem)
    data = chart(r)
    assert data["roof"]["measured"] and data["points"][0]["line"] == 3
    assert data["points"][0]["verdict"] == "compute-bound"
    assert data["memory"]["lines"][0]["peak_bytes"] == 2**19


def test_a_schema_2_result_has_no_points():
    doc = result([line(3, us=10.0)]).to_dict()
    for ln in doc["lines"]:
        for key in ("flops", "bytes", "backward_flops", "backward_bytes", "dtype"):
            del ln[key]
    doc.update(schema_version=2, roof=None)
    assert chart(Result.from_dict(doc))["points"] == []

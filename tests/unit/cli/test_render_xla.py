"""An xla result's CLI text stays a screen long: fusions grouped per line with
"+K more", the top instructions; --verbose lists them all; buckets get a row."""

from __future__ import annotations

from trainium_lens.cli.render.result import render_result
from trainium_lens.cli.render.text import Style
from trainium_lens.model.result import Result


def xla_result() -> Result:
    regions = [
        {
            "name": f"fusion.{i}",
            "file": "m.py",
            "line": 10 + i % 3,
            "self_time_us": 100.0 - i,
            "calls": 1,
            "covered_lines": [{"file": "m.py", "line": 10 + i % 3}, {"file": "m.py", "line": 20}],
        }
        for i in range(40)
    ]
    ops = [
        {"name": f"fusion.{i}", "calls": 1, "self_time_us": 100.0 - i, "total_time_us": 1, "self_cpu_us": 1}
        for i in range(90)
    ]
    return Result.from_dict(
        {
            "schema_version": 3,
            "run_id": "r",
            "created_at": "2026-11-30T00:00:00+00:00",
            "backend": "xla",
            "clock": "xla-cpu",
            "host": "local",
            "function": {"file": "m.py", "name": "step", "line": 3},
            "totals": {"self_time_us": 5000.0, "self_cpu_us": 5000.0, "wall_us_median": 9000.0, "steps": 5},
            "lines": [
                {
                    "file": "m.py",
                    "line": 10,
                    "self_time_us": 4000.0,
                    "total_time_us": 4000.0,
                    "self_cpu_us": 4000.0,
                    "calls": 30,
                }
            ],
            "regions": regions,
            "ops": ops,
            "unattributed_us": 10.0,
            "buckets": [{"name": "graph plumbing", "self_time_us": 990.0, "calls": 3}],
            "signals": {"graphs_per_step": 1},
        }
    )


def test_default_groups_fusions_per_line_and_caps_the_instructions():
    text = render_result(xla_result(), Style())
    assert "compiled regions: 40 fusions on 3 lines" in text
    row = next(ln for ln in text.splitlines() if ln.strip().startswith("line 10:"))
    assert (
        "14 fusions" in row and "fusion.0 100 µs" in row and "+11 more" in row and "fuses lines 20 too" in row
    )
    assert "fusion.89" not in text and "+78 more instructions" in text
    assert "(graph plumbing)" in text and "(unattributed)" in text
    assert "1 graph per step" in text and "dispatch" not in text
    assert len(text.splitlines()) < 45


def test_verbose_keeps_every_fusion_and_instruction():
    text = render_result(xla_result(), Style(verbose=True))
    assert all(f"fusion.{i}:" in text for i in range(40))
    assert "fusion.89" in text and "more instructions" not in text

"""Comparisons on the true clock, and whole-step run diffs, as pure functions.

The results are built by hand from figures measured on this machine (the
issue's RMSNorm example: profiled CPU per call against the unprofiled wall
median) and from a training step's shape; the CLI test runs them for real
(tests/integration/cli/test_cli.py).
"""

from __future__ import annotations

import pytest

from trainium_lens.analysis.compare import diff_runs
from trainium_lens.analysis.variants import BASIS_DEVICE, BASIS_WALL, compare_variants
from trainium_lens.cli.render.compare import render_comparison, render_diff
from trainium_lens.cli.render.text import Style, fmt_us
from trainium_lens.model.result import Result

MAIN = "train.py"


def stat(n, text, fwd, bwd=0.0, file=MAIN, function="step"):
    return {
        "file": file,
        "line": n,
        "self_time_us": fwd,
        "total_time_us": fwd,
        "self_cpu_us": fwd,
        "calls": 1.0,
        "text": text,
        "function": function,
        "backward_self_time_us": bwd,
        "backward_total_time_us": bwd,
    }


def run(lines, *, name="step", run_id="r-0", clock="cpu", wall=None, unattributed=0.0, reported=True):
    fwd = sum(ln["self_time_us"] for ln in lines)
    bwd = sum(ln["backward_self_time_us"] for ln in lines)
    total = fwd + bwd + unattributed
    return Result.from_dict(
        {
            "schema_version": 2,
            "run_id": run_id,
            "created_at": "2026-11-30T10:00:00Z",
            "backend": clock,
            "clock": clock,
            "host": "local",
            "function": {"file": MAIN, "name": name, "line": 1},
            "totals": {
                "self_time_us": total,
                "self_cpu_us": total,
                "wall_us_median": wall,
                "wall_us_min": wall and wall * 0.9,
                "wall_us_max": wall and wall * 1.5,
                "steps": 5,
                "dispatches": float(len(lines)),
                "forward_time_us": fwd + unattributed,
                "backward_time_us": bwd,
            },
            "lines": lines,
            "unattributed_us": unattributed,
            "signals": {"device_time_reported": reported},
        }
    )


# -- variants: speedups from the true clock ------------------------------------------


def rmsnorm_variants(clock="cpu", reported=True):
    # profiled CPU per call vs unprofiled wall median, as measured on the example
    # (issue: naive 27.6 / 16.6 µs, fused 93.0 / 15.8 µs, compiled 3060 / 23.7 µs)
    figures = {"naive": (27.6, 16.6), "fused": (93.0, 15.8), "compiled": (3060.0, 23.7)}
    return [
        run([stat(2, "x", profiled)], name=name, run_id=f"b-{i}", wall=wall, clock=clock, reported=reported)
        for i, (name, (profiled, wall)) in enumerate(figures.items())
    ]


def test_cpu_variants_rank_as_their_unprofiled_walls_do():
    c = compare_variants(rmsnorm_variants())
    assert c.speedup_basis == BASIS_WALL and "profiled" in c.note
    by = {r.variant: r for r in c.rows}
    assert by["fused"].speedup == pytest.approx(16.6 / 15.8)  # faster, though profiled 3.4x slower
    assert by["compiled"].speedup == pytest.approx(16.6 / 23.7)
    assert [r.rank for r in c.rows] == [2, 1, 3] and c.fastest == "fused"
    assert by["fused"].profiled_speedup == pytest.approx(27.6 / 93.0)  # kept, never the ranking
    walls = sorted(c.rows, key=lambda r: r.wall_us_median or 0.0)
    assert [r.variant for r in walls] == [r.variant for r in sorted(c.rows, key=lambda r: r.rank or 0)]


def test_device_time_ranks_where_every_variant_has_it():
    c = compare_variants(rmsnorm_variants(clock="cuda"))
    assert c.speedup_basis == BASIS_DEVICE and c.note is None
    assert c.fastest == "naive" and c.rows[1].speedup == pytest.approx(27.6 / 93.0)
    # The device reported no kernel time: its figures are CPU time, so the walls rank.
    fallback = compare_variants(rmsnorm_variants(clock="cuda", reported=False))
    assert fallback.speedup_basis == BASIS_WALL and fallback.fastest == "fused"


def test_no_walls_no_speedups_and_the_table_says_why():
    variants = rmsnorm_variants()
    variants[1].totals.wall_us_median = None
    c = compare_variants(variants)
    assert c.speedup_basis is None and c.fastest is None
    assert all(r.speedup is None and r.rank is None for r in c.rows)
    text = render_comparison(c, Style())
    assert "no speedups" in text and "fastest" not in text


def test_comparison_table_heads_the_ranking_clock():
    text = render_comparison(compare_variants(rmsnorm_variants()), Style())
    lines = text.splitlines()
    assert lines[0] == "comparison (speedup from the unprofiled wall medians, output against naive)"
    assert lines[1].split()[:6] == ["variant", "line", "wall", "median", "min–max", "speedup"]
    assert "profiled (cpu, ops + host)" in lines[1]
    fused = next(ln for ln in lines if ln.split()[0] == "fused")
    assert "1.05×" in fused.split() and "93" in fused.split()
    assert "  fastest: fused (15.8 µs, unprofiled wall median)" in lines


def test_comparison_columns_hold_what_they_are_named():
    """The profiled column is the headline's figure (ops + host on the cpu clock), and walls
    timed in turn are named so, not as the function's own wall (its header's)."""
    from trainium_lens.cli.render.result import headline

    variants = rmsnorm_variants()
    for i, r in enumerate(variants):
        r.totals.host_time_us = 2.0 + i
        r.totals.paired_wall_us_median = r.totals.wall_us_median * 1.2  # in turn: another condition
        r.totals.paired_wall_us_min = r.totals.wall_us_median
        r.totals.paired_wall_us_max = r.totals.wall_us_median * 1.5
    c = compare_variants(variants)
    assert c.walls_in_turn
    lines = render_comparison(c, Style()).splitlines()
    assert "walls timed in turn" in lines[0] and lines[1].split()[2:4] == ["wall", "in"]
    naive = next(ln for ln in lines if ln.split()[0] == "naive")
    assert fmt_us(27.6 + 2.0) in naive and fmt_us(27.6) + " " not in naive  # ops + host, as the headline
    assert fmt_us(27.6 + 2.0) in headline(variants[0])
    assert "wall in turn)" in lines[-2] or any("wall in turn)" in ln for ln in lines)
    alone = compare_variants(rmsnorm_variants())  # each one's own wall: named as the header's
    assert not alone.walls_in_turn and "wall median" in render_comparison(alone, Style()).splitlines()[1]


# -- one run against another: the whole step ------------------------------------------


def training_runs():
    before = run(
        [
            stat(10, "x = attn(q, k, v)", 696.0, 1400.0),
            stat(11, "loss = head(x)", 100.0, 50.0),
            stat(12, "return x * w", 5.0, 6.0, file="helper.py", function="scale"),
            stat(20, "optimizer.step()", 300.0),
        ],
        run_id="a-0",
        wall=3000.0,
        unattributed=10.0,
    )
    after = run(
        [
            stat(10, "x = attn(q, k, v)", 888.0, 4400.0),  # the backward went 1.40 -> 4.40 ms
            stat(11, "loss = head(x)", 100.0, 50.0),
            stat(12, "return x * w", 4.0, 6.0, file="helper.py", function="scale"),
            stat(12, "y = x * 2", 1.0),  # the profiled file's own line 12 (new)
            stat(20, "optimizer.step()", 300.0),
        ],
        run_id="a-1",
        wall=6000.0,
        unattributed=25.0,
    )
    return before, after


def test_run_diff_shows_backward_per_line():
    d = diff_runs(*training_runs())
    assert d.backward and d.file == MAIN
    top = d.lines[0]
    assert (top.file, top.after_line, top.status) == (MAIN, 10, "same")
    assert (top.before_fwd_us, top.after_fwd_us, top.fwd_delta_us) == (696.0, 888.0, 192.0)
    assert (top.before_bwd_us, top.after_bwd_us, top.bwd_delta_us) == (1400.0, 4400.0, 3000.0)
    assert (top.before_us, top.after_us, top.delta_us) == (2096.0, 5288.0, 3192.0)


def test_lines_of_two_files_never_pair_across_files():
    d = diff_runs(*training_runs())
    twelve = {(x.file, x.status): x for x in d.lines if 12 in (x.before_line, x.after_line)}
    assert set(twelve) == {("helper.py", "same"), (MAIN, "added")}
    assert twelve[("helper.py", "same")].delta_us == -1.0


def test_totals_are_the_sum_of_their_parts():
    before, after = training_runs()
    d = diff_runs(before, after)
    t = d.totals
    for side, res in (("before", before), ("after", after)):
        lines_fwd, lines_bwd = getattr(t, f"{side}_lines_fwd_us"), getattr(t, f"{side}_lines_bwd_us")
        step = getattr(t, f"{side}_us")
        assert lines_fwd + lines_bwd + getattr(t, f"{side}_unattributed_us") == pytest.approx(step)
        assert step == res.totals.self_time_us
    changes = sum(x.delta_us for x in d.lines) + (t.after_unattributed_us - t.before_unattributed_us)
    assert changes == pytest.approx(t.delta_us)
    assert sum(x.fwd_delta_us + x.bwd_delta_us for x in d.lines) == pytest.approx(
        sum(x.delta_us for x in d.lines)
    )
    assert t.speedup == pytest.approx(0.5) and t.speedup_basis == BASIS_WALL  # the walls doubled


def test_run_diff_table_names_files_and_backward():
    text = render_diff(diff_runs(*training_runs()), Style())
    lines = text.splitlines()
    header = next(ln for ln in lines if ln.lstrip().startswith("line"))
    assert header.split() == [
        "line",
        "source",
        "fwd",
        "(cpu)",
        "Δ",
        "fwd",
        "bwd",
        "(cpu)",
        "Δ",
        "bwd",
        "fwd+bwd",
        "(cpu)",
        "Δ",
        "ratio",
        "status",
    ]
    attn = next(ln for ln in lines if "attn(q, k, v)" in ln)
    assert "696 µs → 888 µs" in attn and "1.4 ms → 4.4 ms" in attn and "+3 ms" in attn
    assert any(ln.startswith("  helper.py:12 ") for ln in lines)
    assert any(ln.startswith("  12 ") and "y = x * 2" in ln for ln in lines)
    d = diff_runs(*training_runs())
    total = [ln for ln in lines if ln.split()[:1] == ["total"]][-1]  # the table's last row
    step = f"{fmt_us(d.totals.before_us)} → {fmt_us(d.totals.after_us)}"
    assert step == "2.57 ms → 5.77 ms" and step in total and "(unattributed)" in text
    assert "  speedup 0.5× (unprofiled wall median" in text
    assert "forward" in lines[2] and "backward" in lines[2]


def test_forward_only_diff_keeps_its_simple_columns():
    before = run([stat(3, "y = x * x", 30.0)], run_id="f-0")
    after = run([stat(3, "y = x * x", 15.0)], run_id="f-1")
    d = diff_runs(before, after)
    assert not d.backward
    text = render_diff(d, Style())
    header = next(ln for ln in text.splitlines() if ln.lstrip().startswith("line"))
    assert header.split() == [
        "line",
        "source",
        "before",
        "(cpu)",
        "after",
        "(cpu)",
        "delta",
        "ratio",
        "status",
    ]
    rows = [ln for ln in text.splitlines() if ln.startswith("  3 ")]
    assert any("-15 µs" in ln and "0.5×" in ln for ln in rows), rows


def test_a_busy_hosts_walls_are_flagged_not_trusted():
    # examples/train_step.py at load 12 on 2 cores: medians of 335 and 80 ms, best calls ~2 ms
    variants = rmsnorm_variants()
    variants[0].totals.wall_us_median, variants[0].totals.wall_us_min = 335.0, 2.25
    c = compare_variants(variants)
    assert [r.wall_noisy for r in c.rows] == [True, False, False] and c.fastest is None
    assert (
        "rms_norm" not in c.note
        and "the wall median of naive is over 1.5× its best call (up to 149×)" in c.note
    )
    text = render_comparison(c, Style())
    assert "1× (busy)" in text and "not reliable" in text and "fastest: not judged" in text
    d = diff_runs(variants[0], variants[1])
    assert d.note is not None and "the speedup is not reliable" in d.note
    quiet = rmsnorm_variants()
    assert not any(r.wall_noisy for r in compare_variants(quiet).rows)
    assert "busy" not in (diff_runs(quiet[0], quiet[1]).note or "")


def test_a_run_with_a_noisy_measurement_finding_is_named_in_the_comparison():
    from trainium_lens.model.result import Finding

    before, after = training_runs()
    after.findings.append(Finding("noisy_measurement", "warning", MAIN, 1, "another process used 0.9 cores"))
    d = diff_runs(before, after)
    assert (
        d.note is not None and "the run after was measured on a disturbed host (noisy_measurement)" in d.note
    )
    c = compare_variants([before, after])
    assert c.note is not None and "step was measured on a disturbed host" in c.note

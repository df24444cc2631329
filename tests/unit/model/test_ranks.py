"""The core side of torchrun jobs, from plain documents: the merge of ranks'
results (model/ranks.py), the event sink, the straggler finding, the editor text."""

from __future__ import annotations

import copy

import pytest

from trainium_lens.analysis.findings.analyze import analyze
from trainium_lens.engine.rank_events import RankEvents
from trainium_lens.lsp.present import rank_format
from trainium_lens.model.lines import LineStat
from trainium_lens.model.ranks import merge_document, merge_results
from trainium_lens.model.result import Batch, Result


def _line(line: int, self_us: float, ops: list[tuple[str, float]]) -> dict:
    return {
        "file": "t.py",
        "line": line,
        "self_time_us": self_us,
        "total_time_us": self_us,
        "self_cpu_us": self_us,
        "calls": float(len(ops)),
        "self_time_us_min": self_us * 0.9,
        "self_time_us_max": self_us * 1.1,
        "self_time_us_median": self_us,
        "ops": [
            {"name": n, "calls": 1.0, "self_time_us": t, "self_cpu_us": t, "direct_calls": 1.0}
            for n, t in ops
        ],
    }


def _result(rank: int, mm_us: float, wait_us: float, extra_line: bool = False) -> dict:
    lines = [
        _line(10, mm_us, [("aten::mm", mm_us)]),
        _line(12, wait_us + 10, [("c10d::wait", wait_us), ("c10d::allreduce_", 10.0)]),
    ]
    if extra_line:
        lines.append(_line(14, 5.0, [("aten::add", 5.0)]))
    total = sum(ln["self_time_us"] for ln in lines)
    return {
        "schema_version": 1,
        "run_id": "b-0",
        "batch_id": "b",
        "created_at": "2026-11-30T00:00:00",
        "backend": "cpu",
        "clock": "cpu",
        "host": "local",
        "function": {"file": "t.py", "name": "step", "line": 9},
        "totals": {
            "self_time_us": total,
            "self_cpu_us": total,
            "wall_us_median": 2000.0 + rank,
            "steps": 3,
            "per_step_self_time_us": [total, total + 1, total + 2],
        },
        "ops": [
            {
                "name": "aten::mm",
                "calls": 1.0,
                "self_time_us": mm_us,
                "total_time_us": mm_us,
                "self_cpu_us": mm_us,
            }
        ],
        "lines": lines,
        "unattributed_us": 1.0 * rank,
        "artifacts": {
            "location": "local",
            "run_dir": f"/runs/b/rank{rank}",
            "trace": f"/runs/b/rank{rank}/b-0.trace.json",
        },
        "timeline": [{"file": "t.py", "line": 10, "windows": [{"start_us": 100.0 * rank, "dur_us": mm_us}]}],
        "signals": {"warnings": [f"only on rank {rank}"] if rank else []},
    }


def _document(results: list[dict]) -> dict:
    return {
        "schema_version": 1,
        "batch_id": "b",
        "world_size": len(results),
        "results": [results[0]],
        "rank_batches": [
            {
                "rank": k,
                "run_dir": f"/runs/b/rank{k}",
                "batch": {"schema_version": 1, "batch_id": "b", "results": [r]},
            }
            for k, r in enumerate(results)
        ],
    }


def test_merge_medians_spread_slowest_and_wait():
    # rank 1 computes 3x longer; ranks 0 and 2 wait for it in the collective
    doc = _document(
        [_result(0, 100.0, 200.0), _result(1, 300.0, 0.0, extra_line=True), _result(2, 110.0, 190.0)]
    )
    (merged,) = merge_document(doc)["results"]
    res = Result.from_dict(merged)
    assert res.world_size == 3 and [r.rank for r in res.ranks] == [0, 1, 2]
    mm = res.line("t.py", 10)
    assert mm is not None
    assert [(p.rank, p.self_time_us) for p in mm.per_rank] == [(0, 100.0), (1, 300.0), (2, 110.0)]
    assert mm.self_time_us == 110.0  # the median rank
    assert (mm.rank_min_us, mm.rank_max_us, mm.slowest_rank) == (100.0, 300.0, 1)
    assert [op.self_time_us for op in mm.ops] == [110.0]
    ar = res.line("t.py", 12)
    assert ar is not None
    assert [p.wait_us for p in ar.per_rank] == [200.0, 0.0, 190.0]
    assert [r.wait_us for r in res.ranks] == [200.0, 0.0, 190.0]
    # a line only rank 1 ran: the others count 0, so its median is 0
    only = res.line("t.py", 14)
    assert only is not None and only.self_time_us == 0.0 and only.slowest_rank == 1
    # totals: medians; each rank keeps its own folder, trace and timeline
    assert res.totals.wall_us_median == 2001.0
    assert res.ranks[2].artifacts.run_dir == "/runs/b/rank2"
    assert res.ranks[1].timeline[0].windows[0].start_us == 100.0
    assert res.signals.warnings == ["rank 1: only on rank 1", "rank 2: only on rank 2"]
    # the stored form reads back the same
    assert Result.from_dict(res.to_dict()) == res


def test_straggler_finding_names_rank_and_line():
    doc = _document([_result(0, 100.0, 200.0), _result(1, 300.0, 0.0), _result(2, 110.0, 190.0)])
    res = Batch.from_dict(merge_document(doc)).results[0]
    (finding,) = [f for f in analyze(res) if f.kind == "straggler"]
    assert finding.line == 10 and finding.severity == "warning"
    assert finding.message.startswith("Rank 1 is the straggler")
    assert "rank 0 200 µs" in finding.message and "rank 2 190 µs" in finding.message


def test_balanced_ranks_have_no_straggler():
    doc = _document([_result(0, 100.0, 5.0), _result(1, 102.0, 3.0)])
    res = Batch.from_dict(merge_document(doc)).results[0]
    assert not [f for f in analyze(res) if f.kind == "straggler"]


def test_a_plain_batch_passes_through_untouched():
    one = _result(0, 1.0, 1.0)
    plain = {"schema_version": 1, "batch_id": "b", "results": [one]}
    before = copy.deepcopy(plain)
    assert merge_document(plain) is plain and plain == before
    res = Result.from_dict(one)
    stored = res.to_dict()
    assert "ranks" not in stored and "per_rank" not in stored["lines"][0]


def test_merge_results_orders_by_rank():
    merged = merge_results([(1, _result(1, 300.0, 0.0)), (0, _result(0, 100.0, 200.0))])
    assert [r["rank"] for r in merged["ranks"]] == [0, 1]
    assert merged["run_id"] == "b-0" and merged["artifacts"]["run_dir"] == "/runs/b/rank0"


def test_rank_events_show_rank_zero_and_explain_a_hang():
    seen: list[dict] = []
    sink = RankEvents(seen.append)
    sink({"event": "stage", "stage": "launch", "function": None, "message": "starting 2 ranks"})
    for rank in (0, 1):
        sink({"event": "stage", "stage": "profile", "message": "step 1 of 3", "rank": rank})
        sink({"event": "warning", "message": "same words", "rank": rank})
    sink({"event": "output", "text": "hello", "rank": 1})
    sink(
        {
            "event": "stage",
            "stage": "collective",
            "message": "rank 0 has waited 3 s in all_reduce at t.py:12",
            "rank": 0,
        }
    )
    assert [e.get("rank") for e in seen if e["event"] == "stage"] == [None, 0, 0]
    assert [e["message"] for e in seen if e["event"] == "warning"] == ["same words"]
    assert [e["text"] for e in seen if e["event"] == "output"] == ["[rank 1] hello"]
    text = sink.explain("timed out after 5 s")
    assert text.startswith("timed out after 5 s; rank 0 has waited 3 s in all_reduce at t.py:12")
    assert "never joined it: rank 1 (last: profile: step 1 of 3)" in text
    assert RankEvents(seen.append).explain("timed out") == "timed out"


def test_a_hang_explained_later_says_how_long_in_all():
    """The harness notes a wait after its first seconds; the timeout a minute later
    says the whole wait, not the note's "3 s"."""
    now = [100.0]
    sink = RankEvents(lambda _e: None, clock=lambda: now[0])
    sink({"event": "stage", "stage": "launch", "function": None, "message": "starting 2 ranks"})
    sink({"event": "stage", "stage": "profile", "message": "step 1 of 3", "rank": 1})
    note = "rank 0 has waited 3 s in all_reduce at t.py:12"
    sink(
        {
            "event": "stage",
            "stage": "collective",
            "message": note,
            "rank": 0,
            "collective": "all_reduce",
            "where": "t.py:12",
            "waited_s": 3.0,
        }
    )
    now[0] += 57.0
    text = sink.explain("timed out after 60 s")
    assert text.startswith("timed out after 60 s; rank 0 has waited 60 s in all_reduce at t.py:12"), text
    assert "3 s" not in text and "never joined it: rank 1" in text


def test_hint_and_hover_text():
    doc = _document([_result(0, 100.0, 200.0), _result(1, 138.0, 0.0), _result(2, 90.0, 240.0)])
    res = Batch.from_dict(merge_document(doc)).results[0]
    mm = res.line("t.py", 10)
    assert mm is not None and rank_format.hint_spread(mm) == "rank 1 +38%"
    table = rank_format.hover_table(mm) or ""
    assert "3 ranks: median **100 µs**" in table and "| 1 (slowest) | 138 µs |" in table
    assert "wait" not in table
    collective = res.line("t.py", 12)
    assert isinstance(collective, LineStat)
    ar = rank_format.hover_table(collective) or ""
    assert "| rank | self | total | wait | vs median |" in ar
    single = Result.from_dict(_result(0, 1.0, 1.0))
    assert rank_format.hint_spread(single.lines[0]) is None
    assert rank_format.hover_table(single.lines[0]) is None


@pytest.mark.parametrize("value, expected", [(0, None), (4, 4)])
def test_nproc_setting(value, expected):
    from trainium_lens.lsp.settings import parse

    settings, problems = parse({"trainiumLens": {"nproc": value}})
    assert not problems and settings.nproc == expected


def test_cli_rank_section():
    from trainium_lens.cli.render.ranks import render_ranks

    doc = _document([_result(0, 100.0, 200.0), _result(1, 300.0, 0.0), _result(2, 110.0, 190.0)])
    res = Batch.from_dict(merge_document(doc)).results[0]
    text = render_ranks(res)
    assert "3 ranks (line figures above: the median rank)" in text
    assert "/runs/b/rank2" in text
    mm_row = next(ln for ln in text.splitlines() if ln.strip().startswith("10 "))
    assert "rank 1 +173%" in mm_row
    collective_row = next(ln for ln in text.splitlines() if ln.strip().startswith("12 "))
    assert "rank 0 200 µs" in collective_row and "rank 2 190 µs" in collective_row
    assert render_ranks(Result.from_dict(_result(0, 1.0, 1.0))) == ""


def test_rank_result_is_one_ranks_view():
    from trainium_lens.errors import UsageError
    from trainium_lens.model.ranks import rank_result

    doc = _document([_result(0, 100.0, 200.0), _result(1, 300.0, 0.0)])
    res = Batch.from_dict(merge_document(doc)).results[0]
    one = rank_result(res, 1)
    assert one.artifacts.run_dir == "/runs/b/rank1" and one.run_id == f"{res.run_id}.rank1"
    assert one.timeline[0].windows[0].start_us == 100.0
    with pytest.raises(UsageError, match="has no rank 5"):
        rank_result(res, 5)


def test_inlay_hint_and_hover_of_a_ranked_line():
    from trainium_lens.lsp.features.hover import markdown
    from trainium_lens.lsp.features.inlay_hints import label
    from trainium_lens.lsp.runs import Annotation, Annotations

    doc = _document([_result(0, 100.0, 200.0), _result(1, 138.0, 0.0), _result(2, 90.0, 240.0)])
    res = Batch.from_dict(merge_document(doc)).results[0]
    mm = res.line("t.py", 10)
    assert mm is not None
    a = Annotation(9, mm, res, stale=False)
    assert label(a) == "⏱ 100 µs cpu · 32% · 1 op · rank 1 +38%"
    text = markdown("file:///t.py", a, Annotations([a], {9: a}, []))
    assert "3 ranks: median **100 µs cpu**" in text and "| 2 | 90 µs cpu | 90 µs cpu | -10% |" in text


def test_torchrun_jobs_bypass_the_warm_worker(tmp_path):
    """The warm worker forks one harness per job; a torchrun job (its agent and ranks
    in process groups of their own) starts cold: the setting, or a marker's nproc=."""
    from trainium_lens.model.job import make_job, wants_ranks

    src = tmp_path / "m.py"
    src.write_text(
        "# trainium: profile nproc=2\ndef a():\n    pass\n\n# trainium: profile\ndef b():\n    pass\n"
    )
    assert wants_ranks(make_job(src, workspace=tmp_path))
    assert wants_ranks(make_job(src, functions=["a"], workspace=tmp_path))
    assert not wants_ranks(make_job(src, functions=["b"], workspace=tmp_path))
    assert not wants_ranks(make_job(src, functions=["a"], workspace=tmp_path, nproc=1))
    assert wants_ranks(make_job(src, functions=["b"], workspace=tmp_path, nproc=4))
    bad = tmp_path / "bad.py"  # the launcher rejects it; the job goes the one-process way
    bad.write_text("# trainium: profile nproc=two\ndef a():\n    pass\n")
    assert not wants_ranks(make_job(bad, workspace=tmp_path))


# torchrun 2.13's own report when rank 1 called os._exit(7) and the agent stopped
# rank 0 (captured from a real run)
TORCHRUN_FAILURE = """\
die.py FAILED
------------------------------------------------------------
Failures:
[1]:
  time      : 2026-11-30_04:07:05
  host      : localhost
  rank      : 0 (local_rank: 0)
  exitcode  : -15 (pid: 12091)  (SIGTERM)
  error_file: <N/A>
  traceback : Signal 15 (SIGTERM) received by PID 12091
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-11-30_04:07:05
  host      : localhost
  rank      : 1 (local_rank: 1)
  exitcode  : 7 (pid: 12092)
  error_file: <N/A>
============================================================
"""


def test_the_root_cause_of_torchruns_report_names_the_rank_that_died():
    from trainium_lens.harness.torchrun.launch import _root_cause

    assert _root_cause(TORCHRUN_FAILURE.splitlines(keepends=True)) == (1, 7)
    assert _root_cause(["Traceback (most recent call last):\n", "ValueError: x\n"]) is None


def test_the_fit_block_is_the_median_ranks_not_rank_zeros():
    results = [_result(0, 100.0, 200.0), _result(1, 300.0, 0.0), _result(2, 110.0, 190.0)]
    for k, r in enumerate(results):
        ops = r["totals"]["self_time_us"]
        r["totals"]["host_time_us"] = 5.0
        bound = -(10.0 + 5 * k)  # the host time each rank's gaps read, less its wall's bound
        r["fit"] = {
            "ops_us": ops,
            "host_us": 5.0 - bound,
            "unfitted_us": ops + 5.0 - bound,
            "fitted_us": ops + 5.0,
            "added_us": bound,
            "share": -bound / (ops + 5.0),
            "parts": [{"kind": "host_bounded", "us": bound}],
        }
    (merged,) = merge_document(_document(results))["results"]
    res = Result.from_dict(merged)
    assert res.fit is not None
    shown = res.totals.self_time_us + (res.totals.host_time_us or 0.0)
    assert res.fit.fitted_us == shown  # the merged totals' figure, not rank 0's
    assert res.fit.ops_us == results[2]["fit"]["ops_us"]  # the median rank's ops (320 µs)
    assert [(p.kind, p.us) for p in res.fit.parts] == [("host_bounded", -15.0)]
    assert res.fit.unfitted_us == res.fit.ops_us + res.fit.host_us

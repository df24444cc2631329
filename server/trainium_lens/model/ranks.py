"""The ranks of a torchrun job (``--nproc N``) made into one result per function.

The harness's launcher (``harness/torchrun/launch.py``) hands back a batch document that
holds every rank's own batch (``rank_batches``); ``merge_document`` turns it
into an ordinary batch whose results carry, on top of today's shape:

* ``ranks[]``: each rank's totals, its collective wait, its artifacts (its own
  run folder: trace, Neuron profile) and its timeline;
* per line, ``per_rank[]`` ({rank, self_time_us, total_time_us, wait_us}), the
  **median** across ranks as the line's figures, ``rank_min_us``/``rank_max_us``
  and ``slowest_rank``.

Collective ops (``c10d::allreduce_`` and friends, and ``c10d::wait``: the
harness's range around a synchronous collective, where a rank that arrived
early waits for the others) are attributed to their lines like any op. A rank's
*wait* on a line is its collective time there minus the fastest rank's: the
time it spent waiting for the slowest.

The events of a running job's ranks are the engine's (``engine/rank_events.py``).

Works on plain dicts (before validation): the merge of 8 ranks of 2,000 lines
is one pass over each rank's lines (bench/ranks_bench.py).
"""

from __future__ import annotations

import dataclasses
import math

from trainium_lens.errors import UsageError
from trainium_lens.model.result import Result

#: Op name prefixes of collectives (eager c10d, functional collectives).
COLLECTIVE_PREFIXES = ("c10d::", "_c10d_functional::", "c10d_functional::")
_LINE_NUMBERS = ("self_time_us", "total_time_us", "self_cpu_us", "calls")
_OP_NUMBERS = ("calls", "self_time_us", "total_time_us", "self_cpu_us", "device_time_us", "direct_calls")


def rank_name(rank: int, node: str | None = None) -> str:
    """``rank 3``, or ``node2 / rank 3`` for a rank of a job across nodes."""
    return f"{node} / rank {rank}" if node else f"rank {rank}"


def is_collective(op_name: str) -> bool:
    return op_name.startswith(COLLECTIVE_PREFIXES)


def _median(values: list[float]) -> float:
    """``statistics.median``, without its overhead (called per line and op)."""
    n = len(values)
    if n == 0:
        return 0.0
    ordered = sorted(values)
    mid = n // 2
    return float(ordered[mid]) if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2.0


def merge_document(document: dict) -> dict:
    """A launcher's document → an ordinary batch (anything else passes through)."""
    rank_batches = document.get("rank_batches")
    if not isinstance(rank_batches, list) or not rank_batches:
        return document
    ranked = sorted(rank_batches, key=lambda rb: rb.get("rank", 0))
    per_rank_results = [rb.get("batch", {}).get("results") or [] for rb in ranked]
    count = min(len(results) for results in per_rank_results)
    places = {int(rb.get("rank", k)): _place(rb) for k, rb in enumerate(ranked)}
    merged = []
    for index in range(count):
        entries = [(int(rb.get("rank", k)), per_rank_results[k][index]) for k, rb in enumerate(ranked)]
        merged.append(merge_results(entries, places))
    return {
        "schema_version": document.get("schema_version", 1),
        "batch_id": document.get("batch_id", ""),
        "results": merged,
    }


def _place(rank_batch: dict) -> dict:
    """Where a rank ran, in a job across nodes: ``node`` (host name), ``node_rank``,
    ``local_rank``; empty for a one-node job."""
    place: dict = {}
    if isinstance(rank_batch.get("node"), str) and rank_batch["node"]:
        place["node"] = rank_batch["node"]
    for key in ("node_rank", "local_rank"):
        if isinstance(rank_batch.get(key), int) and not isinstance(rank_batch.get(key), bool):
            place[key] = rank_batch[key]
    for key in ("clock_offset_ms", "clock_uncertainty_ms"):
        value = rank_batch.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            place[key] = float(value)
    return place


def merge_results(entries: list[tuple[int, dict]], places: dict[int, dict] | None = None) -> dict:
    """One function's results, one per rank (rank, result dict) → one result.
    ``places``: rank → where it ran (a job across nodes)."""
    places = places or {}
    entries = sorted(entries, key=lambda e: e[0])
    ranks = [r for r, _ in entries]
    base = dict(entries[0][1])
    lines, waits = _merge_lines(entries, {r: p["node"] for r, p in places.items() if "node" in p})
    base["lines"] = lines
    base["ops"] = _merge_named([res.get("ops") or [] for _r, res in entries], len(entries))
    base["ops"].sort(key=lambda op: -op["self_time_us"])
    base["totals"] = _merge_totals([res.get("totals") or {} for _r, res in entries])
    base["unattributed_us"] = _median([float(res.get("unattributed_us") or 0.0) for _r, res in entries])
    if base.get("fit"):
        base["fit"] = _merge_fit([res.get("fit") or {} for _r, res in entries], base["totals"])
    signals = dict(base.get("signals") or {})
    warnings: list[str] = []
    for rank, res in entries:
        for w in (res.get("signals") or {}).get("warnings") or []:
            if w not in warnings:
                warnings.append(w if rank == ranks[0] else f"rank {rank}: {w}")
    signals["warnings"] = warnings
    base["signals"] = signals
    base["world_size"] = len(entries)
    base["ranks"] = [
        {
            "rank": rank,
            "self_time_us": float((res.get("totals") or {}).get("self_time_us") or 0.0),
            "self_cpu_us": float((res.get("totals") or {}).get("self_cpu_us") or 0.0),
            "wall_us_median": (res.get("totals") or {}).get("wall_us_median"),
            "wait_us": waits[rank][0],
            "collective_us": waits[rank][1],
            "artifacts": res.get("artifacts") or {},
            "timeline": res.get("timeline") or [],
            **places.get(rank, {}),
        }
        for rank, res in entries
    ]
    return base


def _merge_lines(
    entries: list[tuple[int, dict]], node_of: dict[int, str] | None = None
) -> tuple[list[dict], dict[int, tuple[float, float]]]:
    """Lines of every rank by (file, line); figures are medians over the ranks (a
    rank that never ran a line counts 0 there). Also each rank's total wait and
    collective time."""
    by_key: dict[tuple, list[tuple[int, dict]]] = {}
    for rank, res in entries:
        for line in res.get("lines") or []:
            key = (line.get("file"), line.get("line"))
            slot = by_key.get(key)
            if slot is None:
                slot = by_key[key] = []
            slot.append((rank, line))
    ranks = [r for r, _ in entries]
    waits = dict.fromkeys(ranks, 0.0)
    colls = dict.fromkeys(ranks, 0.0)
    out = []
    for present in by_key.values():
        have = dict(present)
        merged = dict(present[0][1])
        for field in _LINE_NUMBERS:
            merged[field] = _median([float(have[r].get(field) or 0.0) if r in have else 0.0 for r in ranks])
        coll = {
            r: sum(
                float(op.get("self_time_us") or 0.0)
                for op in have[r].get("ops") or []
                if is_collective(str(op.get("name", "")))
            )
            if r in have
            else 0.0
            for r in ranks
        }
        fastest = min(coll.values()) if any(coll.values()) else 0.0
        per_rank = []
        for r in ranks:
            line = have.get(r)
            wait = coll[r] - fastest if fastest or coll[r] else 0.0
            waits[r] += wait
            colls[r] += coll[r]
            figures: dict[str, object] = {
                "rank": r,
                "self_time_us": float(line.get("self_time_us") or 0.0) if line else 0.0,
                "total_time_us": float(line.get("total_time_us") or 0.0) if line else 0.0,
                "wait_us": wait,
                "collective_us": coll[r],
            }
            if node_of and r in node_of:
                figures["node"] = node_of[r]
            per_rank.append(figures)
        selfs = [float(p["self_time_us"]) for p in per_rank]  # type: ignore[arg-type]
        merged["per_rank"] = per_rank
        merged["rank_min_us"] = min(selfs)
        merged["rank_max_us"] = max(selfs)
        merged["slowest_rank"] = per_rank[selfs.index(max(selfs))]["rank"]
        merged["self_time_us_min"] = min(float(ln.get("self_time_us_min") or 0.0) for _r, ln in present)
        merged["self_time_us_max"] = max(float(ln.get("self_time_us_max") or 0.0) for _r, ln in present)
        merged["self_time_us_median"] = merged["self_time_us"]
        merged["ops"] = _merge_named([ln.get("ops") or [] for _r, ln in present], len(ranks))
        merged["step_us"] = _median_steps([have[r].get("step_us") or [] if r in have else [] for r in ranks])
        out.append(merged)
    out.sort(key=lambda ln: -ln["self_time_us"])
    return out, {r: (waits[r], colls[r]) for r in ranks}


def _merge_named(groups: list[list[dict]], n_ranks: int) -> list[dict]:
    """Entries named ``name`` across ranks: numeric fields as medians (missing: 0),
    in the first rank's order (a line's ops keep program order)."""
    merged: dict[str, dict] = {}
    seen: dict[str, list[dict]] = {}
    for group in groups:
        for op in group:
            name = op.get("name", "")
            same = seen.get(name)
            if same is None:
                merged[name] = dict(op)
                same = seen[name] = []
            same.append(op)
    for name, same in seen.items():
        out = merged[name]
        pad = [0.0] * (n_ranks - len(same))
        for f in _OP_NUMBERS:
            if f in out:
                out[f] = _median([float(o.get(f) or 0.0) for o in same] + pad)
    return list(merged.values())


def _merge_totals(all_totals: list[dict]) -> dict:
    totals = dict(all_totals[0])
    for field in ("self_time_us", "self_cpu_us", "dispatches"):
        totals[field] = _median([float(t.get(field) or 0.0) for t in all_totals])
    walls = [float(t["wall_us_median"]) for t in all_totals if t.get("wall_us_median") is not None]
    totals["wall_us_median"] = _median(walls) if walls else None
    mins = [float(t["wall_us_min"]) for t in all_totals if t.get("wall_us_min") is not None]
    maxs = [float(t["wall_us_max"]) for t in all_totals if t.get("wall_us_max") is not None]
    totals["wall_us_min"] = min(mins) if mins else None
    totals["wall_us_max"] = max(maxs) if maxs else None
    steps = [t.get("per_step_self_time_us") or [] for t in all_totals]
    width = min(len(s) for s in steps)
    per_step = [_median([s[i] for s in steps]) for i in range(width)]
    totals["per_step_self_time_us"] = per_step
    totals["step_us"] = _median_steps([t.get("step_us") or [] for t in all_totals])
    totals["self_time_us_min"] = min(per_step) if per_step else 0.0
    totals["self_time_us_max"] = max(per_step) if per_step else 0.0
    return totals


def _merge_fit(fits: list[dict], totals: dict) -> dict:
    """``Result.fit`` of the median rank, as its totals are: the unfitted ops and host
    time and each kind of fit by their medians over the ranks, the figure shown the
    merged totals' (model/fit.py) — not rank 0's block beside the ranks' medians."""
    ops = _median([float(f.get("ops_us") or 0.0) for f in fits])
    host = _median([float(f.get("host_us") or 0.0) for f in fits])
    fitted = float(totals.get("self_time_us") or 0.0) + float(totals.get("host_time_us") or 0.0)
    kinds = sorted({p["kind"] for f in fits for p in f.get("parts") or []})
    parts = []
    for kind in kinds:
        us = _median([sum(p["us"] for p in f.get("parts") or [] if p["kind"] == kind) for f in fits])
        if us:
            parts.append({"kind": kind, "us": us})
    return {
        "ops_us": ops,
        "host_us": host,
        "unfitted_us": ops + host,
        "fitted_us": fitted,
        "added_us": fitted - ops - host,
        "share": sum(abs(p["us"]) for p in parts) / fitted if fitted > 0 else 0.0,
        "parts": parts,
    }


def _median_steps(samples: list[list[float]]) -> list[float]:
    """Step by step, the median across ranks (a rank without a line's samples counts
    0 in each step, as in the line's figures; none anywhere: none)."""
    if not any(samples):
        return []
    width = max(len(s) for s in samples)
    return [_median([s[i] if i < len(s) else 0.0 for s in samples]) for i in range(width)]


def rank_result(result: Result, rank: int) -> Result:
    """``result`` as seen from one rank: its artifacts (trace, Neuron profile) and
    timeline, and a run id of its own (the ranks' traces share a file name;
    fetched copies must not)."""
    run = next((r for r in result.ranks if r.rank == rank), None)
    if run is None:
        have = ", ".join(str(r.rank) for r in result.ranks) or "none: a one-process run"
        raise UsageError(f"run {result.run_id} has no rank {rank} (ranks: {have})")
    return dataclasses.replace(
        result, artifacts=run.artifacts, timeline=run.timeline, run_id=f"{result.run_id}.rank{rank}"
    )

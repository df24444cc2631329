"""The variants of one comparison timed in turn (``compare=``, and ``fix``'s before
and after): their speedups come from walls taken in the same stretch of time.

Each function's own unprofiled wall (``measure.time_unprofiled``) is timed in
its own block, minutes apart from the next variant's on a slow profile: on a
shared host the whole machine speeds up and slows down between blocks, and the
ratio of two such walls moved from 1.5× to 2.2× run to run for a fix whose
plain alternating timing read 1.53× every time (docs/fixes.md). Here, once every
function of the batch has run, the variants of each group are called in turn,
``rounds`` times: one sample of each per round, the order rotated each round,
each sample timed as ``time_unprofiled`` times one (a batch of back-to-back
calls, the loop's own cost subtracted, clean only when no thread waited for a
CPU). Drift then reaches every variant alike. The results get
``totals.paired_wall_us_median``/``_min``/``_max`` and ``stability.paired_rounds``;
``analysis/variants.py`` takes speedups from them when every variant has them.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from trainium_lens.harness.eager.measure import loop_overhead_us, plain_calls, plain_sample, timed_once
from trainium_lens.harness.markers import variant_group


def time_in_turn(s: Any, docs: list[dict]) -> None:
    """``s.timed``: function name -> (group, call, calls per sample, timing calls)."""
    groups: dict[str, list[tuple[dict, Any, int, int]]] = {}
    for doc in docs:
        entry = s.timed.get(doc["function"]["name"])
        if entry is not None:
            group, call, per, want = entry
            groups.setdefault(group, []).append((doc, call, per, want))
    for group, members in groups.items():
        # variants named so (compare=, or one inputs= function); functions that merely
        # take no inputs are no comparison
        if len(members) >= 2 and group != variant_group(None, None):
            _time_group(s, members)


def _time_group(s: Any, members: list[tuple[dict, Any, int, int]]) -> None:
    names = ", ".join(call.name for _d, call, _p, _w in members)
    rounds = max(want for _d, _c, _p, want in members)
    s.events.stage("timing", None, f"{len(members)} variants in turn ({names}): {rounds} rounds")
    loops = {per: loop_overhead_us(per, s.backend.sync) for _d, _c, per, _w in members}
    times: list[list[float]] = [[] for _ in members]
    clean: list[list[float]] = [[] for _ in members]
    with plain_calls(s):
        for _d, call, _p, _w in members:  # each warm again after the others ran
            timed_once(call)
        for r in range(rounds):
            for k in range(len(members)):
                i = (k + r) % len(members)  # no variant always first (or last) in its round
                _doc, call, per, _w = members[i]
                per_call, undisturbed = plain_sample(call, per, loops[per])  # as time_unprofiled's
                times[i].append(per_call)
                if undisturbed:
                    clean[i].append(per_call)
    enough = math.ceil(rounds / 2)
    for i, (doc, _c, _p, _w) in enumerate(members):
        used = clean[i] if len(clean[i]) >= enough else times[i]
        doc["totals"]["paired_wall_us_median"] = statistics.median(used)
        doc["totals"]["paired_wall_us_min"] = min(used)
        doc["totals"]["paired_wall_us_max"] = max(used)
        doc.setdefault("stability", {})["paired_rounds"] = rounds
        doc["stability"]["paired_clean"] = len(clean[i])

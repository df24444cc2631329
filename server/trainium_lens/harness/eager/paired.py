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

Each variant after the first also gets its **per-pair ratios** against the first
(``totals.paired_ratios``: the first's sample / this one's, round by round; pairs
in which no thread waited for a CPU when there are enough of them) and what they
say (``pairs.judge``: the median ratio, its 99 % interval, faster / slower / same /
undecided). With ``paired_s=N`` on the markers (``fix`` writes it) the rounds go
on, ``ROUND`` at a time, until every variant's verdict is decided and its size known
to ±15 % (``Verdict.settled``; after ``MIN_S`` at least) or ``N`` seconds
of timing (or ``MAX_PAIRS``) have passed; undecided then is the verdict
("not measurable on this host now", docs/fixes.md).
"""

from __future__ import annotations

import math
import statistics
import time
from typing import Any

from trainium_lens.harness.eager.measure import loop_overhead_us, plain_calls, plain_sample, timed_once
from trainium_lens.harness.markers import variant_group
from trainium_lens.harness.pairs import judge, pair_ratios

ROUND = 20  # pairs between two looks at the verdict
# with a bound, time at least this long (or the bound, if shorter) before a verdict: pairs
# of a 16 µs function fill 50 rounds in 0.07 s, one moment of the host's; over seconds
# they sample its busy and its quiet stretches, as a user's many calls will
MIN_S = 2.0
MAX_PAIRS = 5000  # a bound on the recorded ratios whatever the time bound


def time_in_turn(s: Any, docs: list[dict]) -> None:
    """``s.timed``: function name -> (group, call, calls per sample, timing calls, paired_s)."""
    groups: dict[str, list[tuple[dict, Any, int, int, int]]] = {}
    for doc in docs:
        entry = s.timed.get(doc["function"]["name"])
        if entry is not None:
            group, call, per, want, bound = entry
            groups.setdefault(group, []).append((doc, call, per, want, bound))
    for group, members in groups.items():
        # variants named so (compare=, or one inputs= function); functions that merely
        # take no inputs are no comparison
        if len(members) >= 2 and group != variant_group(None, None):
            _time_group(s, members)


def _time_group(s: Any, members: list[tuple[dict, Any, int, int, int]]) -> None:
    names = ", ".join(call.name for _d, call, _p, _w, _b in members)
    rounds = max(want for _d, _c, _p, want, _b in members)
    bound = max(b for *_rest, b in members)
    until = f", then until a verdict or {bound} s" if bound else ""
    s.events.stage("timing", None, f"{len(members)} variants in turn ({names}): {rounds} rounds{until}")
    loops = {per: loop_overhead_us(per, s.backend.sync) for _d, _c, per, _w, _b in members}
    times: list[list[float]] = [[] for _ in members]
    clean: list[bool] = []  # per round: no sample of it waited for a CPU
    done = 0
    with plain_calls(s):
        for _d, call, _p, _w, _b in members:  # each warm again after the others ran
            timed_once(call)
        start = time.monotonic()
        while True:
            for r in range(done, done + rounds):
                undisturbed = True
                for k in range(len(members)):
                    i = (k + r) % len(members)  # no variant always first (or last) in its round
                    _doc, call, per, _w, _b = members[i]
                    per_call, ok = plain_sample(call, per, loops[per])  # as time_unprofiled's
                    times[i].append(per_call)
                    undisturbed = undisturbed and ok
                clean.append(undisturbed)
            done += rounds
            elapsed = time.monotonic() - start
            if not bound or elapsed >= bound or done >= MAX_PAIRS:
                break
            if elapsed >= min(MIN_S, bound) and all(
                judge(_ratios(times, clean, i)).settled for i in range(1, len(members))
            ):
                break
            rounds = min(ROUND, MAX_PAIRS - done)
    used_rounds = _used(clean)
    for i, (doc, _c, _p, _w, _b) in enumerate(members):
        used = [times[i][r] for r in used_rounds]
        doc["totals"]["paired_wall_us_median"] = statistics.median(used)
        doc["totals"]["paired_wall_us_min"] = min(used)
        doc["totals"]["paired_wall_us_max"] = max(used)
        st = doc.setdefault("stability", {})
        st["paired_rounds"] = done
        st["paired_clean"] = sum(clean)
        st["paired_s"] = round(elapsed, 3)
        st["paired_bound_s"] = bound
        if i:  # the ratios against the first variant, and what they say
            ratios = _ratios(times, clean, i)
            doc["totals"]["paired_ratios"] = [round(x, 5) for x in ratios]
            v = judge(ratios)
            doc["totals"]["paired_ratio"] = v.ratio
            doc["totals"]["paired_ratio_low"] = v.low
            doc["totals"]["paired_ratio_high"] = v.high
            doc["totals"]["paired_verdict"] = v.verdict


def _used(clean: list[bool]) -> list[int]:
    """The rounds to use: the undisturbed ones when at least half are, else all."""
    kept = [r for r, ok in enumerate(clean) if ok]
    return kept if len(kept) >= math.ceil(len(clean) / 2) else list(range(len(clean)))


def _ratios(times: list[list[float]], clean: list[bool], i: int) -> list[float]:
    rounds = _used(clean)
    return pair_ratios([times[0][r] for r in rounds], [times[i][r] for r in rounds])

"""Measure in steady state, and measure more while the host disturbs the steps.

Why (found on ``examples/rmsnorm.py``, docs/harness.md "Measuring one function"): a
compiled CPU kernel is an OpenMP parallel region over every intra-op thread,
even for a 4×512 tensor (eager ops that small stay on the calling thread). The
pool's workers spin briefly after a region, then sleep; the next region must
wake them, and on a busy host a woken worker waits for a core (a scheduler time
slice: milliseconds) while the caller blocks at the region's barrier. The first
calls after any pause (compiling, the profiler's first start, writing a
progress event) paid that wait: 4–14 ms against a 24 µs steady call. Three
parts keep the measured calls in the state the unprofiled timing sees:

* ``settle``: back-to-back unprofiled calls until the call time is steady (at
  least the protocol's ``wait``; capped), before the profiler and before the
  timing calls;
* ``calls_per_step``: on the CPU clock a step makes several back-to-back calls
  of a tiny function (a step of ``STEP_TARGET_US``), so the step boundary's cold
  start is spread over them (every figure stays per call);
* ``StepPlan``: the profiler's schedule, open-ended: a measured step whose
  threads waited for a CPU (run-queue delay, ``runtime/host.py``) is not *clean*; more
  steps are measured until ``active`` clean ones exist or the cap is reached.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

SETTLE_MAX_S = 1.0  # settling stops here, steady or not
SETTLE_MAX_CALLS = 200
STEADY_RUN = 3  # this many calls in a row ...
STEADY_RATIO = 1.5  # ... within this factor of the fastest call: steady
STEP_TARGET_US = 400.0  # CPU clock: calls per step so that a step lasts about this
MAX_CALLS_PER_STEP = 32
CLEAN_SHARE = 0.10  # a step is clean when its run-queue delay is under 10% of it
CLEAN_FLOOR_US = 5.0  # (plus this much, for timer granularity on tiny steps)
EXTRA_FACTOR = 3  # at most this many times the planned active steps in all
EXTRA_BUDGET_S = 2.0  # and extra steps stop after this long (or the planned steps' time, if longer)


def lockstep() -> bool:
    """A rank of a torchrun job: every rank must make the same calls (the user's
    collectives pair up call by call: one rank settling longer than another would
    leave both waiting in an all-reduce for ever), so no count here adapts to this
    rank's own timings; the figures still come from its clean steps."""
    from trainium_lens.harness.torchrun.rank import world_size

    return world_size() > 1


def steady(times: list[float]) -> bool:
    if len(times) < STEADY_RUN:
        return False
    best = min(times)
    return all(t <= STEADY_RATIO * best for t in times[-STEADY_RUN:])


def settle(
    timed_call: Callable[[], float], min_calls: int, compiling: Callable[[], bool] | None = None
) -> list[float]:
    """Call until steady (after at least ``min_calls``); the call times, µs.
    ``compiling()`` true: the function compiles as it runs (a new shape every
    call): there is no steady state to wait for (the compile finding says why)."""
    if lockstep():
        return [timed_call() for _ in range(min_calls)]
    times: list[float] = []
    t0 = time.perf_counter()
    while len(times) < SETTLE_MAX_CALLS:
        times.append(timed_call())
        if len(times) < min_calls:
            continue
        if steady(times) or time.perf_counter() - t0 > SETTLE_MAX_S:
            break
        if compiling is not None and compiling():
            break
    return times


def calls_per_step(settled: list[float], device_clock: bool) -> int:
    """Back-to-back calls per profiled step: 1 on device clocks (kernel time does
    not see the host's cold start), else enough for a step of ``STEP_TARGET_US``."""
    if device_clock or not settled or lockstep():
        return 1
    call_us = sorted(settled[-STEADY_RUN:])[len(settled[-STEADY_RUN:]) // 2]
    if call_us <= 0:
        return MAX_CALLS_PER_STEP
    return max(1, min(MAX_CALLS_PER_STEP, math.ceil(STEP_TARGET_US / call_us)))


def clean(wall_us: float, delay_us: float | None) -> bool:
    """No thread of ours waited for a CPU for a noticeable part of the step."""
    return delay_us is None or delay_us <= CLEAN_SHARE * wall_us + CLEAN_FLOOR_US


class StepPlan:
    """The profiler's schedule (``torch.profiler.profile(schedule=plan)``) and the
    decision, after each step, whether another is measured.

    Steps: ``wait`` not recorded, ``warmup`` recorded and discarded, then
    recorded steps until enough are clean: ``active`` of them (paired: the
    plain twin of each pair is the one that must be clean, its CPU times are
    the figures). The schedule never saves early: the profile is saved when the
    context exits after the last step (RECORD → stop)."""

    def __init__(self, torch: Any, wait: int, warmup: int, active: int, paired: bool):
        self.actions = torch.profiler.ProfilerAction
        self.wait, self.warmup, self.active, self.paired = wait, warmup, active, paired
        self.per = 2 if paired else 1
        self.first = wait + warmup  # index of the first recorded step
        self.total = self.first + active * self.per
        self.cap = self.first + active * self.per * EXTRA_FACTOR
        self.samples: list[dict] = []  # per recorded step: wall_us, delay_us, switches
        self.started: float | None = None
        self.planned_s: float | None = None

    def __call__(self, step: int) -> Any:
        if step < self.wait:
            return self.actions.NONE
        if step < self.first:
            return self.actions.WARMUP
        return self.actions.RECORD

    def judged(self) -> list[dict]:
        """The samples that decide: every step, or the plain twin of each pair."""
        return self.samples[self.per - 1 :: self.per]

    def clean_count(self) -> int:
        return sum(1 for s in self.judged() if s["clean"])

    def record(self, step: int, wall_us: float, delay_us: float | None, switches: int | None) -> None:
        if step < self.first:
            return
        if self.started is None:
            self.started = time.perf_counter() - wall_us / 1e6
        self.samples.append(
            {
                "wall_us": wall_us,
                "delay_us": delay_us,
                "switches": switches,
                "clean": clean(wall_us, delay_us),
            }
        )
        if step == self.total - 1 and self.planned_s is None:
            self.planned_s = time.perf_counter() - self.started

    def more(self, step: int) -> bool:
        """After step ``step``: is there another? (Extends the plan while too few
        steps were clean, in whole pairs, up to the cap.)"""
        if step + 1 < self.total:
            return True
        if lockstep():  # every rank measures the same steps (see ``lockstep``)
            return False
        if self.clean_count() >= self.active or self.total >= self.cap:
            return False
        spent = time.perf_counter() - (self.started or time.perf_counter())
        if spent > max(EXTRA_BUDGET_S, 2 * (self.planned_s or 0.0)):
            return False
        self.total += self.per
        return True

    def keep(self) -> list[bool] | None:
        """Per recorded step (labelled step of a pair): use it? None: use all —
        too few clean steps to choose from (the run is then judged noisy)."""
        judged = self.judged()
        if sum(1 for s in judged if s["clean"]) < max(1, math.ceil(self.active / 2)):
            return None
        return [s["clean"] for s in judged]

    def evidence(self) -> dict:
        judged = self.judged()
        wall = sum(s["wall_us"] for s in judged)
        delays = [s["delay_us"] for s in judged if s["delay_us"] is not None]
        switches = [s["switches"] for s in judged if s["switches"] is not None]
        return {
            "steps_wanted": self.active,
            "steps_measured": len(judged),
            "steps_clean": sum(1 for s in judged if s["clean"]),
            "extra_steps": max(0, len(judged) - self.active),
            "run_delay_share": round(sum(delays) / wall, 4) if delays and wall > 0 else None,
            "step_switches": round(sum(switches) / len(switches), 2) if switches else None,
        }

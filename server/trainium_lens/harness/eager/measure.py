"""The measured loops of one function: the profiled steps (labelled and plain
twins, several calls per step, more steps while the host disturbs them) and
the unprofiled timing calls (``steady.py`` says why each is shaped so)."""

from __future__ import annotations

import contextlib
import math
import statistics
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from trainium_lens.harness.eager import steady
from trainium_lens.harness.runtime.host import involuntary_switches
from trainium_lens.harness.runtime.lazy_inductor import keep_inductor_lazy
from trainium_lens.harness.torchrun.rank import align_step


def timed(call: Any, calls: int, labelled: bool) -> list[float]:
    times = []
    sync = call.s.backend.sync
    for _ in range(calls):
        t0 = time.perf_counter()
        call(labelled)
        sync()
        times.append((time.perf_counter() - t0) * 1e6)
    return times


def timed_once(call: Any) -> float:
    sync = call.s.backend.sync
    t0 = time.perf_counter()
    call()
    sync()
    return (time.perf_counter() - t0) * 1e6


@dataclass
class Steps:
    """What the profiled steps left behind."""

    prof: Any
    plan: steady.StepPlan
    per_step: int  # back-to-back calls in each step (figures are per call)
    paired: bool
    labelled_calls: int
    h2d_calls: dict
    backend_signals: dict
    at_active: dict  # compile counters when the active steps began
    after: dict  # and when they ended
    hits: dict  # label -> executions of the line in the labelled calls (hits.py)
    # torch calls per label, and those through library code (origin.py)
    origins: tuple = field(default_factory=lambda: ({}, {}))


def profiler_kwargs(s: Any, run_dir: str, run_id: str) -> dict:
    """The backend's profiler arguments, recording every thread where torch can: the
    autograd engine runs a device tensor's backward on its own thread (torch < 2.8:
    no such option; the engine's threads are still recorded for device tensors).
    Every profiler of a run asks for these first, so the start-up guard goes in here."""
    keep_inductor_lazy(torch)
    kwargs = dict(s.backend.profiler_kwargs(run_dir, run_id))
    if "experimental_config" not in kwargs:
        try:
            kwargs["experimental_config"] = torch._C._profiler._ExperimentalConfig(profile_all_threads=True)
        except (TypeError, AttributeError):
            pass
    return kwargs


PROGRESS_EVERY_S = 0.25  # a progress event per step would cost the next step ~7 µs (a pipe write)


def profile_steps(call: Any, protocol: dict, run_id: str, per_step: int) -> Steps:
    # CPU clock: every measured step is followed by the same call unlabelled; CPU
    # times come from those (labels perturb the ops' own CPU time, see
    # attribution.attribute). Device clocks are not perturbed by host labels.
    # The settle phase ran the protocol's ``wait`` calls; a step makes ``per_step``
    # back-to-back calls (steady.py); the plan measures more steps while too few
    # were clean (no thread of ours waited for a CPU).
    s, name = call.s, call.name
    paired = not s.backend.device_clock
    plan = steady.StepPlan(torch, 0, protocol["warmup"], protocol["active"], paired)
    at_active = s.watch.counters()
    s.labeler.h2d.clear()
    s.labeler.hits.clear()
    s.labeler.origins.clear()
    labelled_calls = 0
    delay = s.run_delay
    delay.refresh()  # the OpenMP pool and the autograd threads exist by now
    sync = s.backend.sync
    shown = 0.0
    s.backend.start_capture()
    try:
        with torch.profiler.profile(
            activities=s.backend.activities(),
            schedule=plan,
            **profiler_kwargs(s, s.spec.run_dir, run_id),
        ) as prof:
            step, said = 0, 0
            while True:
                now = time.perf_counter()
                if now - shown >= PROGRESS_EVERY_S:
                    shown, said = now, step + 1
                    s.events.stage("profile", name, f"step {said} of {plan.total}", step=said, of=plan.total)
                if step == plan.first:
                    at_active = s.watch.counters()
                align_step()  # torchrun jobs: every rank starts the step together
                plain = paired and (step - plan.first) % 2
                labelled_calls += 0 if plain else per_step
                d0, sw0 = delay.read_us(), involuntary_switches()
                t0 = time.perf_counter()
                for _ in range(per_step):
                    call(labelled=not plain)
                sync()
                wall = (time.perf_counter() - t0) * 1e6
                d1, sw1 = delay.read_us(), involuntary_switches()
                plan.record(
                    step,
                    wall,
                    None if d0 is None or d1 is None else d1 - d0,
                    None if sw0 is None or sw1 is None else sw1 - sw0,
                )
                if not plan.more(step):
                    break
                step += 1
                prof.step()
            if said != step + 1:  # the last step, once it is over: progress ends at N of N
                s.events.stage(
                    "profile", name, f"step {step + 1} of {plan.total}", step=step + 1, of=plan.total
                )
    finally:
        backend_signals = s.backend.stop_capture()
    return Steps(
        prof,
        plan,
        per_step,
        paired,
        labelled_calls,
        dict(s.labeler.h2d),
        backend_signals,
        at_active,
        s.watch.counters(),
        dict(s.labeler.hits.hits),
        s.labeler.origins.snapshot(),
    )


def time_unprofiled(call: Any, protocol: dict, per_batch: int) -> tuple[list[float], float | None, dict]:
    """The unprofiled wall per call, timed as the user would call the function: no
    labelling mode, no profile hook, no ``--include`` patches (suspended), the
    function called directly. Settled first (the export left the process idle),
    then ``timing_calls`` samples in which no thread waited for a CPU (more, up to
    3×, while samples are disturbed; all of them if too few were clean). A sample
    is a batch of back-to-back calls (as many as a profiled step makes) under one
    timer pair, minus the same loop's own cost measured empty, divided by the
    calls: a timer per call would add its own cost to a tiny function's figure,
    and a run-queue read between calls would cool its caches."""
    s = call.s
    s.events.stage("timing", call.name, f"{protocol['timing_calls']} unprofiled calls")
    with plain_calls(s):
        return _time_plain(call, protocol, per_batch)


BEFORE_SAMPLES = 5


def time_before(call: Any, per_batch: int) -> float:
    """The unprofiled wall just before the profiled steps: the fastest of
    ``BEFORE_SAMPLES`` samples shaped as ``time_unprofiled``'s (a batch of as many
    back-to-back calls as a step makes, the loop's cost subtracted). The fastest, not
    the median: settling stops at three calls within 1.5× of the best, so these samples
    may still be warming (transformers' GPT-2 forward read 4.3, 4.0, 3.4, 3.6, 2.9 ms).
    The settle calls cannot serve: a timer per call reads a compiled kernel's call 2-3×
    its batched time (its OpenMP pool sleeps between them). A fixed count: torchrun's
    ranks make the same calls (``steady.lockstep``)."""
    s = call.s
    batch = max(1, per_batch)
    with plain_calls(s):
        loop_us = loop_overhead_us(batch, s.backend.sync)
        return min(plain_sample(call, batch, loop_us)[0] for _ in range(BEFORE_SAMPLES))


def plain_calls(s: Any) -> contextlib.ExitStack:
    """Nothing of the harness left in the user's path while the wall is timed."""
    stack = contextlib.ExitStack()
    if sys.getprofile() is not None:  # the compiled-call hook is only on inside labelled calls
        prev = sys.getprofile()
        sys.setprofile(None)
        stack.callback(sys.setprofile, prev)
    stack.enter_context(s.include_hooks.suspended())
    return stack


def _time_plain(call: Any, protocol: dict, per_batch: int) -> tuple[list[float], float | None, dict]:
    s = call.s
    sync = s.backend.sync
    compiles = s.watch.counters()["compiles"]
    steady.settle(lambda: timed_once(call), 1, lambda: s.watch.counters()["compiles"] > compiles)
    want = protocol["timing_calls"]
    batch = max(1, per_batch)
    loop_us = loop_overhead_us(batch, sync)
    times: list[float] = []
    clean: list[float] = []
    limit = want if steady.lockstep() else want * steady.EXTRA_FACTOR  # ranks: the same calls
    while len(clean) < want and len(times) < limit:
        per_call, undisturbed = plain_sample(call, batch, loop_us)
        times.append(per_call)
        if undisturbed:
            clean.append(per_call)
    plain = clean if len(clean) >= max(1, math.ceil(want / 2)) else times
    labelled = timed(call, max(3, min(10, want)), True)
    wall = statistics.median(plain)
    timing = {
        "timing_calls": len(times),
        "timing_clean": len(clean),
        "timing_used": len(plain),
        "timing_batch": batch,
        "timing_loop_us": loop_us,
    }
    span_us = s.backend.device_span(call, min(10, want))
    if span_us:
        timing["device_span_us"] = span_us
    return plain, (statistics.median(labelled) / wall if wall > 0 else None), timing


def plain_sample(call: Any, batch: int, loop_us: float) -> tuple[float, bool]:
    """One unprofiled sample: ``batch`` back-to-back calls under one timer pair, the
    loop's own cost (``loop_overhead_us``) subtracted, per call; and whether no thread
    of ours waited for a CPU meanwhile (``steady.clean``)."""
    s = call.s
    fn, args, kwargs, sync, delay = call.fn, call.args, call.kwargs, s.backend.sync, s.run_delay
    perf = time.perf_counter
    calls = range(batch)
    d0 = delay.read_us()
    try:
        t0 = perf()
        for _ in calls:
            fn(*args, **kwargs)
        sync()
        span = (perf() - t0) * 1e6
    except Exception as exc:
        raise s.user.error_from(exc, "user_code", call.name) from None
    d1 = delay.read_us()
    return max(0.0, span - loop_us) / batch, steady.clean(span, None if d0 is None or d1 is None else d1 - d0)


def loop_overhead_us(batch: int, sync: Any, repeats: int = 21) -> float:
    """The timing loop's own cost for one sample (the timer pair, the loop, the
    backend's sync with nothing to wait for; not a call: calling the function is
    the user's cost): the median of ``repeats`` empty samples, subtracted from
    each timed one."""
    perf = time.perf_counter
    calls = range(batch)
    spans = []
    for _ in range(repeats):
        t0 = perf()
        for _ in calls:
            pass
        sync()
        spans.append((perf() - t0) * 1e6)
    return statistics.median(spans)

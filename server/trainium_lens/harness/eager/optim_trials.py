"""An optimizer's ``step`` implementations timed against each other, on the run's device.

``torch.optim``'s optimizers implement ``step`` three ways: a Python loop over
the parameters (``foreach=False``), one ``_foreach_*`` op per update term over
all of them (``foreach=True``) and one fused kernel (``fused=True``). Which is
fastest depends on the device and the parameter count: on this machine's CPU
(issue "Advice measured wrong") ``foreach=True`` made AdamW's step *slower*
(1.16 → 1.29 ms) while ``fused=True`` took 0.354 ms. So the advice is measured,
not assumed:

1. ``OptimizerWatch`` notes every optimizer whose ``step`` runs during the
   function's first (unprofiled) call, through torch's global step pre-hook,
   with the user line that called it (the line its ``Optimizer.step#…``
   range is credited to) and a copy of the gradients it is about to use. An
   optimizer that does not step in the first call (gradient accumulation) is
   not measured; its finding then says so.
2. After the unprofiled timing, ``measure`` builds, per optimizer and per
   implementation, a new optimizer of the same class and hyperparameters over
   **copies** of its parameters, gradients and state (``state_dict`` deep-copied,
   its groups' ``foreach``/``fused`` set), on the same device, and times
   ``step()`` (synchronized, no profiler) round-robin — A B C, B C A, C A B … —
   so a busy host's drift falls on all three alike. Each round's step of the
   current implementation over each other's is one **paired ratio**; their median,
   its 99 % interval and verdict (``harness/pairs.py``) go on the trial
   (``paired_ratio``/``_low``/``_high``/``_verdict``), and the rounds go on past the
   budget (up to ``BOUND`` × it) while a verdict is undecided. A best step of each
   read SGD's ``foreach=True`` 3× faster where a paired timer read 2.3–2.5×: the two
   bests come from different moments of the host. The user's optimizer, parameters
   and state are never touched.
3. ``attach`` puts the figures on the result's ``optimizers[]`` entry
   (``OptimizerStat.trials``); ``analysis/findings/optimizer.py`` names the fastest.

Bounds: ``BUDGET_S`` of timed steps per optimizer (at least ``MIN_STEPS`` and at
most ``MAX_STEPS`` rounds, after ``WARMUP``); copies larger than ``ROUND_ROBIN_BYTES``
in all are made and timed one implementation at a time instead. An
implementation the class lacks (``RMSprop`` has no ``fused=``) or that fails
here carries its one-line reason instead of a time.
"""

from __future__ import annotations

import copy
import inspect
import math
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch

from trainium_lens.harness.eager import steady
from trainium_lens.harness.pairs import judge, pair_ratios

CONFIGS: tuple[tuple[str, dict[str, bool]], ...] = (
    ("foreach=False", {"foreach": False, "fused": False}),
    ("foreach=True", {"foreach": True, "fused": False}),
    ("fused=True", {"foreach": False, "fused": True}),
)
BUDGET_S = 1.5
BOUND = 3.0  # × the budget: the most a trial goes on for an undecided paired verdict
WARMUP = 2
MIN_STEPS = 20  # pairs.MIN_PAIRS: fewer rounds give no paired verdict
ENOUGH_STEPS = 50  # rounds that end a decided trial before its budget (a fast step)
MAX_STEPS = 400
ROUND_ROBIN_BYTES = 1 << 30


@dataclass
class Seen:
    """An optimizer whose ``step`` ran, the user line that called it, and the
    gradients it stepped with (copied before its first step: a training step
    that ends in ``zero_grad(set_to_none=True)`` leaves none behind)."""

    optimizer: Any
    file: str
    line: int
    grads: dict[int, torch.Tensor] = field(default_factory=dict)  # id(param) -> gradient


class OptimizerWatch:
    """The optimizers whose ``step`` ran while ``watch()`` was open."""

    def __init__(self, user: Any):
        self.user = user  # job.loader.UserCode: which frames are the user's
        self.seen: dict[int, Seen] = {}  # id(optimizer) -> what was seen

    @contextmanager
    def watch(self) -> Iterator[None]:
        self.seen = {}
        try:
            from torch.optim.optimizer import register_optimizer_step_pre_hook as register
        except ImportError:  # older torch: nothing is watched, nothing measured
            register = None
        handle = register(self._hook) if register is not None else None
        try:
            yield
        finally:
            if handle is not None:
                handle.remove()

    def _hook(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if id(optimizer) not in self.seen:
            file, line = self._caller()
            grads = {
                id(p): p.grad.detach().clone()
                for g in optimizer.param_groups
                for p in g["params"]
                if p.grad is not None
            }
            self.seen[id(optimizer)] = Seen(optimizer, file, line, grads)
        return None

    def _caller(self) -> tuple[str, int]:
        frame: Any = sys._getframe(1)
        while frame is not None:
            rel = self.user.code_rel(frame.f_code)
            if rel is not None:
                return rel, frame.f_lineno
            frame = frame.f_back
        return "", 0


Delay = Callable[[], "float | None"]  # this process's run-queue delay so far (µs), or None


def measure(
    watch: OptimizerWatch, sync: Callable[[], None], budget_s: float = BUDGET_S, delay: Delay | None = None
) -> list[dict]:
    """One entry per optimizer seen: ``{name, file, line, device, trials}``. ``delay``
    (``runtime/host.RunQueueDelay.read_us``): rounds in which a step waited for a CPU
    are left out of the paired ratios when at least half are clean — a longer step
    (the loop's) is hit by more of a busy host's preemptions, which would read as a
    speedup of the shorter one."""
    out = []
    for seen in watch.seen.values():
        optimizer = seen.optimizer
        params = [p for g in optimizer.param_groups for p in g["params"]]
        grads = {id(p): p.grad if p.grad is not None else seen.grads.get(id(p)) for p in params}
        if not any(g is not None for g in grads.values()):
            continue  # a step with no gradients does nothing: nothing to compare
        out.append(
            {
                "name": f"Optimizer.step#{type(optimizer).__name__}.step",
                "file": seen.file,
                "line": seen.line,
                "device": str(params[0].device),
                "trials": _trials(optimizer, params, grads, sync, budget_s, delay),
            }
        )
        seen.grads = {}  # the copies are made: let the snapshot go
    return out


def attach(optimizers: list[dict], measured: list[dict]) -> None:
    """Put each measurement on its ``optimizers[]`` entry (same range name and line)."""
    for m in measured:
        for entry in optimizers:
            if (entry["name"], entry["file"], entry["line"]) == (m["name"], m["file"], m["line"]):
                entry["trials"] = m["trials"]
                entry["trials_device"] = m["device"]
                break


def current_config(optimizer: Any, params: list) -> str:
    """The implementation ``step`` runs now: the group's flags, or torch's default."""
    group = optimizer.param_groups[0]
    if group.get("fused"):
        return "fused=True"
    if group.get("foreach") is None and not group.get("fused"):
        try:
            from torch.optim.optimizer import _default_to_fused_or_foreach

            _fused, foreach = _default_to_fused_or_foreach(params, bool(group.get("differentiable")), False)
        except Exception:  # a private helper: when it moves, assume the CPU default
            foreach = False
        return "foreach=True" if foreach else "foreach=False"
    return "foreach=True" if group.get("foreach") else "foreach=False"


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:200]}" if text else type(exc).__name__


def _copy(optimizer: Any, flags: dict[str, bool], grads: dict[int, Any] | None = None) -> Any:
    """A new optimizer over copies of the parameters, gradients (``grads`` by
    ``id(param)``, else each parameter's own) and state."""
    cls = type(optimizer)
    accepted = inspect.signature(cls.__init__).parameters
    flags = {k: v for k, v in flags.items() if k in accepted}  # RMSprop: no fused= at all
    groups = []
    for group in optimizer.param_groups:
        params = []
        for p in group["params"]:
            q = p.detach().clone().requires_grad_(p.requires_grad)
            grad = grads.get(id(p)) if grads is not None else p.grad
            if grad is not None:
                q.grad = grad.detach().clone()
            params.append(q)
        rest = {k: copy.deepcopy(v) for k, v in group.items() if k != "params"}
        groups.append({**rest, **flags, "params": params})
    kwargs = {k: v for k, v in optimizer.defaults.items() if k in accepted}
    new = cls(groups, **{**kwargs, **flags})
    state = copy.deepcopy(optimizer.state_dict())  # tensors cloned: the original is never shared
    for group in state["param_groups"]:
        group.update(flags)  # load_state_dict keeps the saved groups' settings
    new.load_state_dict(state)
    return new


def _bytes(optimizer: Any, params: list) -> int:
    total = sum(p.numel() * p.element_size() * 2 for p in params)  # the parameter and its gradient
    for state in optimizer.state.values():
        for value in state.values():
            if isinstance(value, torch.Tensor):
                total += value.numel() * value.element_size()
    return total


def _trials(
    optimizer: Any,
    params: list,
    grads: dict[int, Any],
    sync: Callable[[], None],
    budget_s: float,
    delay: Delay | None = None,
) -> list[dict]:
    cls = type(optimizer)
    accepted = inspect.signature(cls.__init__).parameters
    current = current_config(optimizer, params)
    trials = {label: {"config": label, "current": label == current, "steps": 0} for label, _ in CONFIGS}
    runnable = []
    for label, flags in CONFIGS:
        missing = [k for k, on in flags.items() if on and k not in accepted]
        if missing:
            trials[label]["error"] = f"{cls.__name__} has no {missing[0]}= option"
        else:
            runnable.append((label, flags))
    together = _bytes(optimizer, params) * len(runnable) <= ROUND_ROBIN_BYTES
    groups = [runnable] if together else [[item] for item in runnable]
    for group in groups:  # all at once (round-robin), or one implementation at a time
        copies = {}
        for label, flags in group:
            try:
                copies[label] = _copy(optimizer, flags, grads)
            except Exception as exc:
                trials[label]["error"] = _one_line(exc)
        _time(copies, trials, sync, budget_s * len(group) / max(len(runnable), 1), delay)
        copies.clear()
    return [trials[label] for label, _ in CONFIGS]


def _time(
    copies: dict, trials: dict, sync: Callable[[], None], budget_s: float, delay: Delay | None = None
) -> None:
    """Round-robin steps of ``copies``, the order rotated each round, after ``WARMUP``
    rounds: for ``budget_s`` or ``ENOUGH_STEPS`` rounds (at least ``MIN_STEPS``), and on,
    up to ``BOUND`` × the budget and ``MAX_STEPS`` rounds, while the per-round ratios
    to the current implementation (``pairs.judge``) have not settled every other one."""
    times: dict[str, list[float]] = {label: [] for label in copies}
    rounds_of: dict[str, list[int]] = {label: [] for label in copies}  # the round of each time
    clean: list[bool] = []  # per round: no step of it waited for a CPU
    read = delay or (lambda: None)

    def step(label: str) -> tuple[float | None, bool]:
        try:
            d0 = read()
            t0 = time.perf_counter()
            copies[label].step()
            sync()
            us = (time.perf_counter() - t0) * 1e6
            d1 = read()
            return us, steady.clean(us, None if d0 is None or d1 is None else d1 - d0)
        except Exception as exc:
            trials[label]["error"] = _one_line(exc)
            del copies[label]
            return None, True

    for _ in range(WARMUP):
        for label in list(copies):
            step(label)
    start = time.perf_counter()
    rounds = 0
    while copies and rounds < MAX_STEPS:
        elapsed = time.perf_counter() - start
        if rounds >= MIN_STEPS and (
            elapsed >= BOUND * budget_s
            or ((elapsed >= budget_s or rounds >= ENOUGH_STEPS) and _decided(times, rounds_of, clean, trials))
        ):
            break
        labels = list(copies)
        shift = rounds % len(labels)
        undisturbed = True
        for label in labels[shift:] + labels[:shift]:  # no implementation always first
            us, ok = step(label)
            if us is not None:
                times[label].append(us)
                rounds_of[label].append(rounds)
            undisturbed = undisturbed and ok
        clean.append(undisturbed)
        rounds += 1
    current = next((label for label, t in trials.items() if t["current"]), None)
    for label, values in times.items():
        if values and "error" not in trials[label]:
            trials[label].update(
                time_us=statistics.median(values),
                time_us_min=min(values),
                time_us_max=max(values),
                steps=len(values),
            )
            ratios = _ratios(times, rounds_of, clean, trials, current, label)
            if ratios is not None:
                v = judge(ratios)
                trials[label].update(
                    paired_ratio=v.ratio, paired_low=v.low, paired_high=v.high, paired_verdict=v.verdict
                )


def _ratios(
    times: dict, rounds_of: dict, clean: list[bool], trials: dict, current: str | None, label: str
) -> list[float] | None:
    """The current implementation's step / this one's, round by round (the clean rounds
    when at least half are); None for the current one itself, or when it was not timed."""
    if current is None or label == current or not times.get(current) or "error" in trials[current]:
        return None
    kept = {r for r, ok in enumerate(clean) if ok}
    if len(kept) < math.ceil(len(clean) / 2):
        kept = set(range(len(clean)))
    now = dict(zip(rounds_of[current], times[current], strict=True))
    mine = dict(zip(rounds_of[label], times[label], strict=True))
    both = [r for r in sorted(kept) if r in now and r in mine]
    return pair_ratios([now[r] for r in both], [mine[r] for r in both])


def _decided(times: dict, rounds_of: dict, clean: list[bool], trials: dict) -> bool:
    current = next((label for label, t in trials.items() if t["current"]), None)
    for label in times:
        ratios = _ratios(times, rounds_of, clean, trials, current, label)
        if ratios is not None and not judge(ratios).settled:
            return False
    return True

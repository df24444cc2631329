"""One rank of a torchrun job (``--nproc N``): what the harness does differently
when ``harness/torchrun/launch.py`` started it under ``torch.distributed.run``.

* The job spec comes from a file in the run folder (``TRAINIUM_LENS_SPEC_FILE``):
  stdin is one stream, and N ranks cannot share it.
* Each rank writes into ``<run_dir>/rank<k>/`` (its batch, trace and Neuron
  profile), so artifacts never collide and Explorer can open any rank.
* Every event carries ``rank``; an error's message starts ``rank k:``. Event
  lines are kept under ``PIPE_BUF`` so the ranks' lines on the shared stdout
  pipe never interleave mid-line.
* The process group is initialised before the user's file is imported
  (gloo on CPU, nccl on CUDA, ``neuron`` on TorchNeuron: the Neuron docs'
  ``init_process_group(backend="neuron")`` after ``import torch_neuronx``).
* Synchronous collectives (``dist.all_reduce(...)`` etc.) are wrapped: torch's
  ``c10d::allreduce_`` op only enqueues the work (its wait for the other ranks
  happens outside any op, on gloo as on nccl), so the wrapper puts the whole
  call inside an op-like range ``c10d::wait`` and, while the line labeller is
  on, inside the calling line's labels. A rank that arrives early shows its
  waiting there, on the collective's line.
* A watchdog names a rank that has sat in one collective for ``HANG_NOTE_S``
  (a ``stage`` event ``collective``): when the run times out the core says
  which rank waited where.

Stdlib at import time; torch is passed in (the harness imports it lazily).
"""

from __future__ import annotations

import inspect
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from trainium_lens.harness.runtime import lifeline

SPEC_FILE_ENV = "TRAINIUM_LENS_SPEC_FILE"
#: An event line at most this many bytes: below Linux's PIPE_BUF (4096), so one
#: write(2) of a whole line is atomic on the pipe all ranks share.
MAX_EVENT_BYTES = 3800
#: A rank inside one synchronous collective this long is reported (once per call).
HANG_NOTE_S = float(os.environ.get("TRAINIUM_LENS_HANG_NOTE_S", "3"))
#: The op-like range around a synchronous collective (the wait for the others).
WAIT_OP = "c10d::wait"
#: ``torch.distributed`` functions whose synchronous form waits for every rank.
COLLECTIVES = (
    "all_reduce",
    "all_gather",
    "all_gather_into_tensor",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "broadcast",
    "barrier",
    "reduce",
    "all_to_all",
    "all_to_all_single",
    "gather",
    "scatter",
    "all_gather_object",
    "broadcast_object_list",
)
PG_BACKENDS = {"cpu": "gloo", "cuda": "nccl", "neuron": "neuron"}


def rank_mode() -> bool:
    """Started as one rank of a launched job (not a plain single-process run)."""
    return bool(os.environ.get(SPEC_FILE_ENV)) and "RANK" in os.environ


def rank() -> int:
    return int(os.environ.get("RANK", "0")) if rank_mode() else 0


def world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1")) if rank_mode() else 1


def local_rank() -> int:
    return int(os.environ.get("LOCAL_RANK", "0")) if rank_mode() else 0


def read_spec_text() -> str:
    """The job spec: the launcher's file for a rank, else the line the lifeline
    took from stdin (``harness/runtime/lifeline.py``), else stdin."""
    path = os.environ.get(SPEC_FILE_ENV) if rank_mode() else None
    if path:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    taken = lifeline.spec_text()
    return taken if taken is not None else sys.stdin.read()


def tie_to_agent() -> None:
    """First thing a rank does: die with the torchrun agent that started it.
    torchrun starts each worker in a session of its own, out of reach of the
    process-group kill that stops a run; the kernel SIGKILLs this rank when the
    agent dies (a cancel, a timeout, a kill -9 of the agent), and the agent's
    pid recorded at spawn (``agent.AGENT_PID_ENV``) catches an agent that died
    before the call."""
    if rank_mode():
        from trainium_lens.harness.torchrun.agent import AGENT_PID_ENV

        lifeline.die_with_parent(lifeline.parent_from_env(AGENT_PID_ENV))


def early_setup() -> None:
    """Before torch is imported: one NeuronCore each."""
    if not rank_mode():
        return
    # Each rank holds one core, so in-process core 0 (what the Neuron capture
    # config names) is this rank's core; holding more than it uses leaves the
    # profile empty (Neuron docs). A user's own setting wins.
    if os.environ.get("TRAINIUM_LENS_NEURON_CORE_PER_RANK", "1") == "1":
        os.environ.setdefault("NEURON_RT_VISIBLE_CORES", str(local_rank()))


def adapt_events(events: Any) -> None:
    """Tag every event of this rank with ``rank``, prefix errors, bound line size."""
    if not rank_mode():
        return
    me = rank()
    emit = events.emit
    first = [True]

    def rank_emit(event: str, **fields: Any) -> None:
        fields["rank"] = me
        if first[0]:  # the launcher watches the ranks' pids (a rank that dies silently)
            first[0] = False
            fields["pid"] = os.getpid()
        if event == "error" and isinstance(fields.get("message"), str):
            fields["message"] = f"rank {me}: {fields['message']}"
        emit(event, **_clip(event, fields))

    events.emit = rank_emit


def _clip(event: str, fields: dict) -> dict:
    size = len(json.dumps({"event": event, **fields}, ensure_ascii=False).encode("utf-8"))
    if size <= MAX_EVENT_BYTES:
        return fields
    out = dict(fields)
    if isinstance(out.get("traceback"), str):
        out["traceback"] = "…" + out["traceback"][-1500:]
    for key in ("message", "text"):
        if isinstance(out.get(key), str) and len(out[key]) > 1200:
            out[key] = out[key][:1200] + "…"
    return out


def run_dir_for(run_dir: str) -> str:
    """This rank's own folder inside the job's run folder."""
    return os.path.join(run_dir, f"rank{rank()}") if rank_mode() else run_dir


class _Tracker:
    """Which synchronous collective this rank is in (for the hang watchdog)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.current: tuple[int, str, str, float] | None = None  # (call no, name, where, t0)
        self.calls = 0


_TRACK = _Tracker()


def init(torch: Any, backend_name: str, labeler_ref: Callable[[], Any], events: Any) -> None:
    """Join the process group; wrap the collectives; start the hang watchdog.

    ``labeler_ref()`` returns the session's ``LineLabeler`` once there is one
    (the wrapper labels the calling line only while its mode is on)."""
    if not rank_mode():
        return
    import torch.distributed as tdist

    if backend_name == "cuda":
        torch.cuda.set_device(local_rank())
    if backend_name == "neuron":
        import torch_neuronx  # noqa: F401  (registers the device and the "neuron" backend)
    pg = os.environ.get("TRAINIUM_LENS_PG_BACKEND") or PG_BACKENDS.get(backend_name, "gloo")
    if not tdist.is_initialized():
        import datetime

        from trainium_lens.harness.nodes.launch import PG_TIMEOUT_ENV

        # Across nodes the launcher sets a short bound (a node that never joins,
        # a peer behind a partition); one node keeps torch's default.
        pg_timeout = os.environ.get(PG_TIMEOUT_ENV)
        if pg_timeout:
            tdist.init_process_group(backend=pg, timeout=datetime.timedelta(seconds=float(pg_timeout)))
        else:
            tdist.init_process_group(backend=pg)
    _wrap_collectives(torch, tdist, labeler_ref)
    threading.Thread(target=_watchdog, args=(events,), name="lens-collective-watchdog", daemon=True).start()


def _wrap_collectives(torch: Any, tdist: Any, labeler_ref: Callable[[], Any]) -> None:
    """Replace the public names only (``torch.distributed.all_reduce``): inside
    ``distributed_c10d`` a collective hands itself to the active torch-function
    mode (the line labeller) by its module-level name, and one collective may
    call another; those inner calls must reach torch's own functions."""
    record = getattr(torch._C._profiler, "_RecordFunctionFast", None) or torch.profiler.record_function
    for name in COLLECTIVES:
        original = getattr(tdist, name, None)
        if original is None or getattr(original, "_lens_wrapped", False):
            continue
        setattr(tdist, name, _wrapper(name, original, record, torch, labeler_ref))


def _labels_on(torch: Any, labeler: Any) -> bool:
    depth = torch._C._len_torch_function_stack()
    return any(torch._C._get_function_stack_at(i) is labeler.mode for i in range(depth))


def _wrapper(
    name: str, original: Callable, record: Any, torch: Any, labeler_ref: Callable[[], Any]
) -> Callable:
    def collective(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("async_op"):
            return original(*args, **kwargs)  # its wait is the user's ``work.wait()``
        labeler = labeler_ref()
        caller = sys._getframe(1)
        names = labeler.chain(caller) if labeler is not None and _labels_on(torch, labeler) else []
        ranges = [record(n) for n in names] + [record(WAIT_OP)]
        where = f"{caller.f_code.co_filename}:{caller.f_lineno}"
        with _TRACK.lock:
            _TRACK.calls += 1
            _TRACK.current = (_TRACK.calls, name, where, time.monotonic())
        for r in ranges:
            r.__enter__()
        try:
            return original(*args, **kwargs)
        finally:
            for r in reversed(ranges):
                r.__exit__(None, None, None)
            with _TRACK.lock:
                _TRACK.current = None

    collective._lens_wrapped = True  # type: ignore[attr-defined]
    collective.__name__ = name
    collective.__doc__ = original.__doc__
    collective.__wrapped__ = original  # type: ignore[attr-defined]
    return collective


def _watchdog(events: Any) -> None:
    reported = 0
    while True:
        time.sleep(0.25)
        with _TRACK.lock:
            current = _TRACK.current
        if current is None or current[0] == reported:
            continue
        call, name, where, t0 = current
        waited = time.monotonic() - t0
        if waited >= HANG_NOTE_S:
            reported = call
            events.stage(
                "collective",
                None,
                f"rank {rank()} has waited {waited:.0f} s in {name} at {_short(where)}",
                collective=name,
                where=_short(where),
                waited_s=round(waited, 2),  # so a later message can say how long in all
            )


def _short(where: str) -> str:
    path, _, line = where.rpartition(":")
    try:
        path = os.path.relpath(path)
    except ValueError:
        pass
    return f"{path}:{line}"


_STEPS = [0]


def align_step() -> None:
    """Start each profiled step on every rank at once, so that a collective's
    wait measures the imbalance inside the function, not how far apart the
    ranks' profiler bookkeeping left them. Through torchrun's TCP store, not a
    collective: no op lands in the profile outside the user's lines."""
    if not rank_mode() or world_size() < 2:
        return
    from torch.distributed import distributed_c10d as c10d

    get_store = getattr(c10d, "_get_default_store", None)
    if get_store is None:
        return
    store = get_store()
    _STEPS[0] += 1
    key = f"trainium_lens/step/{_STEPS[0]}"
    if store.add(key, 1) >= world_size():
        store.set(key + "/go", "1")
    store.wait([key + "/go"])  # the last to arrive too: every rank pays the same round trip


def inputs_kwargs(make: Callable[..., Any]) -> dict[str, int]:
    """``rank``/``world_size`` for an ``inputs=`` function that declares them
    (rank 0 of 1 in a single-process run)."""
    try:
        params = inspect.signature(make).parameters
    except (TypeError, ValueError):
        return {}
    values = {"rank": rank(), "world_size": world_size()}
    return {k: v for k, v in values.items() if k in params}

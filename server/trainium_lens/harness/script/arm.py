"""Arm the harness inside the user's own process (``trainium-lens run``).

``boot/sitecustomize.py`` calls ``boot()`` in every Python the command starts
while ``TRAINIUM_LENS_RUN`` names a spec. Which one is armed:

* ``python SCRIPT``: the first Python (the command itself). It removes the
  variable from its environment at once, so nothing it starts (DataLoader
  workers, compile workers, ``subprocess`` children) ever arms.
* ``torchrun`` (and ``accelerate launch``, torchrun's agent in its own process
  or, for one process, the parent of ``python SCRIPT`` without ``LOCAL_RANK``,
  armed as its one worker): the first Python is the agent: it only records its pid
  (``AGENT_ENV``) and the exception that ends it, if one does
  (``launcher_error``), and stays unarmed; its direct children that carry
  ``LOCAL_RANK`` are the workers, each armed (and each clears the variable).
* ``srun … python SCRIPT`` / ``srun … torchrun …``: srun passes the
  environment to every task, so on each node the first Python is the command
  (its rank ``$SLURM_PROCID`` when the step has several tasks) or torchrun's
  agent, as above. Each armed process names where it runs (``place``: host
  name, node rank, local rank) and its SLURM job (``hello``'s ``slurm_job``:
  the launcher scancels it if the run is stopped).

Every process that loads the spec says so in the events file at once
(``hello``), so the CLI can tell "never armed" (``python -I``, a wrapper that
dropped ``PYTHONPATH``) from "slow" within seconds. torch is not imported here:
the steps' hooks go in once the script itself has imported torch (a finder on
``sys.meta_path``), so its environment set-up before ``import torch`` holds; where
torch was imported before the harness armed (the user's own ``sitecustomize``),
they go in at once.
Stdlib only until then.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from typing import Any

from trainium_lens.harness.events import HarnessError
from trainium_lens.harness.script.after_import import AfterImport
from trainium_lens.harness.spec import ScriptSpec, parse_script_spec

RUN_ENV = "TRAINIUM_LENS_RUN"
AGENT_ENV = "TRAINIUM_LENS_RUN_AGENT"
PARENT_ENV = "TRAINIUM_LENS_RUN_PARENT"  # the CLI's pid: a process dies with it


class Events:
    """JSON lines appended to ``<run_dir>/events.jsonl`` (one short write each, so
    the ranks' lines never interleave)."""

    def __init__(self, path: str, rank: int | None, place: dict | None = None):
        self.path, self.rank = path, rank
        self.place = place or {}  # where this rank runs: node, node_rank, local_rank

    def emit(self, event: str, **fields: Any) -> None:
        record = {"event": event, "pid": os.getpid(), "t": time.time(), **fields}
        if self.rank is not None:
            record["rank"] = self.rank
        line = (json.dumps(record, default=str) + "\n").encode("utf-8", "replace")
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, line)
            finally:
                os.close(fd)
        except OSError:
            pass

    def stage(self, stage: str, function: str | None, message: str, **extra: Any) -> None:
        self.emit("stage", stage=stage, function=function, message=message, **extra)

    def warning(self, message: str) -> None:
        self.emit("warning", message=message)


def boot() -> None:
    path = os.environ.get(RUN_ENV, "")
    try:
        with open(path, encoding="utf-8") as handle:
            spec = parse_script_spec(handle.read())
    except (OSError, HarnessError) as exc:
        sys.stderr.write(f"trainium-lens: cannot read the run spec {path}: {exc}\n")
        return
    events_path = os.path.join(spec.run_dir, "events.jsonl")
    role = _role(spec)
    rank = _rank(role)
    events = Events(events_path, rank, _place(role) if rank is not None else None)
    events.emit(
        "hello",
        role=role,
        argv=list(getattr(sys, "orig_argv", sys.argv)),
        node=socket.gethostname(),
        **({"slurm_job": os.environ["SLURM_JOB_ID"]} if os.environ.get("SLURM_JOB_ID") else {}),
    )
    if role == "agent":
        _die_with(PARENT_ENV)
        _say_how_the_agent_ends(events)
        return
    if role != "main" and role != "worker":
        return
    os.environ.pop(RUN_ENV, None)  # nothing this process starts is armed
    if role == "main":
        _die_with(PARENT_ENV)
    else:
        _die_with(AGENT_ENV)
    if os.environ.get("NEURON_RT_INSPECT_ENABLE", "") not in ("", "0"):
        events.emit(
            "aside",
            why="NEURON_RT_INSPECT_ENABLE is set: the Neuron system profile and "
            "torch.profiler cannot run together",
        )
        return
    from trainium_lens.harness.runtime.quiet import quiet_kineto

    quiet_kineto()  # before the script (or the harness) starts any profile
    if _may_be_xla(spec):
        # before torch_xla loads (the script's import, or the backend's right after
        # torch's): the HLO's source frames and torch-xla's device (xla/backend.py)
        from trainium_lens.harness.xla import debug_log
        from trainium_lens.harness.xla.backend import prepare_env

        prepare_env(spec.run_dir)
        debug_log.arm(spec.run_dir)  # torch-xla's execution log, to a file: the steps' cross-check
    if "torch" in sys.modules:  # imported already (by the user's own sitecustomize, a .pth)
        _install(spec, events)
    else:
        sys.meta_path.insert(0, AfterImport("torch", lambda _torch: _install(spec, events)))


def _may_be_xla(spec: ScriptSpec) -> bool:
    """``--backend xla``, or ``auto`` on a Trn1 host (torch-neuronx on torch-xla:
    ``runtime/choose.py`` picks xla there; the variables are unread on any other backend)."""
    import importlib.util

    if spec.backend == "xla":
        return True
    return spec.backend == "auto" and all(
        importlib.util.find_spec(m) is not None for m in ("torch_neuronx", "torch_xla")
    )


def _role(spec: ScriptSpec) -> str:
    if spec.launcher not in ("torchrun", "accelerate"):
        return "main"
    agent = os.environ.get(AGENT_ENV)
    if not agent:
        os.environ[AGENT_ENV] = str(os.getpid())
        return "agent"
    # accelerate launch: torchrun's agent in its own process (its workers carry
    # LOCAL_RANK), or its simple launcher, whose one child runs the script without it
    if agent == str(os.getppid()) and ("LOCAL_RANK" in os.environ or spec.launcher == "accelerate"):
        return "worker"
    return "other"


def _rank(role: str) -> int | None:
    """A worker's ``RANK``; a command that srun started as one of several tasks, its task id."""
    if role == "worker":
        raw = os.environ.get("RANK", "")
    elif role == "main" and _int_env("SLURM_NTASKS", "SLURM_NPROCS") > 1:
        raw = os.environ.get("SLURM_PROCID", "")
    else:
        return None
    return int(raw) if raw.isdigit() else None


def _place(role: str) -> dict:
    """Where this rank runs: torchrun's node rank (``GROUP_RANK``) and local rank, or
    srun's (``SLURM_NODEID``, ``SLURM_LOCALID``)."""
    place: dict = {"node": socket.gethostname()}
    node_env, local_env = (
        ("GROUP_RANK", "LOCAL_RANK") if role == "worker" else ("SLURM_NODEID", "SLURM_LOCALID")
    )
    for field, env in (("node_rank", node_env), ("local_rank", local_env)):
        raw = os.environ.get(env, "")
        if raw.isdigit():
            place[field] = int(raw)
    return place


def _int_env(*names: str) -> int:
    for name in names:
        raw = os.environ.get(name, "")
        if raw.isdigit():
            return int(raw)
    return 0


def _die_with(env: str) -> None:
    """The kernel kills this process when its parent, named in ``env``, dies."""
    from trainium_lens.harness.runtime.lifeline import die_with_parent

    raw = os.environ.get(env, "")
    if raw.isdigit() and int(raw) == os.getppid():
        die_with_parent(int(raw))


def _say_how_the_agent_ends(events: Events) -> None:
    """torchrun's agent: the exception that ends it (its c10d store gone, a worker's
    failure) is written with its node before Python prints it, so the CLI can tell
    the launcher's failure from the script's (``engine/script_exit.py``)."""
    previous = sys.excepthook

    def hook(kind: type[BaseException], value: BaseException, tb: Any) -> None:
        events.emit(
            "launcher_error", type=kind.__name__, message=str(value)[:2000], node=socket.gethostname()
        )
        previous(kind, value, tb)

    sys.excepthook = hook


def _install(spec: ScriptSpec, events: Events) -> None:
    from trainium_lens.harness.script.start import start

    try:
        start(spec, events)
    except Exception as exc:  # the script runs on, unprofiled, and the CLI says why
        import traceback

        from trainium_lens.harness.events import internal_failure

        kind, message = internal_failure(exc)
        events.emit("error", kind=kind, message=message, traceback=traceback.format_exc())

"""Entry point of the harness: ``python -m trainium_lens.harness``.

How it is started (docs/architecture.md): a target copies
``trainium_lens/__init__.py`` and ``trainium_lens/harness/*`` to
``<lens>/trainium_lens/`` on the host, then runs

    PYTHONPATH=<lens> python -m trainium_lens.harness  < spec.json

with the job spec (JSON) on stdin. Events go to stdout as JSON lines
(``stage``, ``warning``, ``output``, ``error``, ``result``); the batch is written
atomically to ``<run_dir>/batch.json``. Exit status 0 after ``result``, 1 after
``error`` (and then no batch.json exists). torch is imported lazily, so a host
without torch still gets a clear ``torch_missing`` error event.
"""

from __future__ import annotations

import os
import signal
import sys
import traceback

from trainium_lens.harness.events import write_json_atomic  # stdlib only


def _write_batch(run_dir: str, batch: dict) -> str:
    os.makedirs(run_dir, exist_ok=True)
    path = os.path.join(run_dir, "batch.json")
    write_json_atomic(path, batch, indent=1)
    return path


def run(events) -> int:
    import importlib.util

    from trainium_lens.harness.events import HarnessError
    from trainium_lens.harness.job import precheck
    from trainium_lens.harness.job.loader import UserCode, load_module
    from trainium_lens.harness.job.packages import check_misplaced, resolve_includes
    from trainium_lens.harness.markers import find_marked, read_source
    from trainium_lens.harness.spec import nproc_for, parse_spec, protocol_for, select
    from trainium_lens.harness.torchrun import launch
    from trainium_lens.harness.torchrun import rank as dist

    spec_text = dist.read_spec_text()
    spec = parse_spec(spec_text)
    rel = spec.file
    path = spec.path
    if not os.path.isfile(path):
        raise HarnessError("spec", f"no such file on this host: {path}")
    try:
        source = read_source(path)  # its coding declaration honoured, as the import will
    except (OSError, UnicodeDecodeError, SyntaxError) as exc:
        raise HarnessError("spec", f"cannot read {rel}: {exc}") from None
    try:
        marked = find_marked(source)
    except SyntaxError as exc:
        raise HarnessError(
            "parse", f"{rel} does not parse: {exc.msg} (line {exc.lineno})", rel, exc.lineno
        ) from None
    check_misplaced(source, spec, rel)  # a marker on a nested function: one-line error
    chosen = select(marked, spec, rel)
    protocols = [protocol_for(m, spec, rel) for m in chosen]  # bad options fail before any work
    precheck.check(source, chosen, rel)
    if spec.slurm is not None:  # the login host: the job runs on the allocation's nodes
        from trainium_lens.harness.nodes import slurm

        return slurm.run(spec, events, spec_text)
    nproc = nproc_for(spec.nproc, chosen, rel)
    if (nproc > 1 or spec.nodes) and not dist.rank_mode():  # this process launches the ranks
        return launch.run(spec, events, spec_text, nproc)
    dist.early_setup()
    if spec.backend == "neuron" and importlib.util.find_spec("torch_neuronx") is None:
        raise HarnessError(
            "backend_unavailable", "backend neuron is not available here: torch_neuronx is not installed"
        )
    from trainium_lens.harness.xla import backend as xla

    if spec.backend == "xla" and xla.unavailable_reason():
        raise HarnessError(
            "backend_unavailable", f"backend xla is not available here: {xla.unavailable_reason()}"
        )
    if spec.backend in ("auto", "neuron") and importlib.util.find_spec("torch_neuronx") is not None:
        from trainium_lens.harness.eager import neuron

        neuron.prepare_env()  # before torch-neuronx compiles: NEFFs with stack frames
    if spec.backend in ("auto", "xla") and importlib.util.find_spec("torch_xla") is not None:
        xla.prepare_env(spec.run_dir, protocols)  # before torch (which may autoload torch-neuronx) loads

    events.stage("import", None, "importing torch")
    try:
        import torch  # noqa: F401  (lazy: a host without torch still gets an error event)
    except ImportError as exc:
        raise HarnessError(
            "torch_missing",
            f"torch is not importable by {sys.executable} "
            f"({exc}); install torch in the interpreter the target uses",
        ) from None
    from trainium_lens.harness.attribution import build
    from trainium_lens.harness.eager.run import Session, profile_function
    from trainium_lens.harness.runtime.choose import choose

    backend = choose(torch, spec.backend)
    spec.run_dir = dist.run_dir_for(spec.run_dir)
    holder: list = []  # the session, once made: the collectives label its lines
    dist.init(torch, backend.name, lambda: holder[0].labeler if holder else None, events)
    user = UserCode(spec.workspace_root, resolve_includes(spec, chosen, rel))
    for note in backend.notes:
        events.warning(note)
    events.stage("import", None, f"importing {rel} (backend {backend.name})")
    os.makedirs(spec.run_dir, exist_ok=True)
    try:
        module = load_module(path, spec.workspace_root, rel)
    except HarnessError:
        raise
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise user.error_from(exc, "user_code", f"importing {rel}") from None
    session = Session(spec, events, backend, module, user, rel)
    holder.append(session)
    results = []
    profile = xla.profile_function if backend.name == "xla" else profile_function
    for index, (m, protocol) in enumerate(zip(chosen, protocols, strict=True)):
        results.append(profile(session, m, index, protocol))
    if backend.name != "xla" and not dist.rank_mode():
        from trainium_lens.harness.eager.paired import time_in_turn

        time_in_turn(session, results)  # a comparison's variants, their walls side by side
    batch = build.batch_document(spec.batch_id, results)
    events.stage("done", None, f"{len(results)} function(s) profiled")
    out = _write_batch(spec.run_dir, batch)
    events.emit("result", path=os.path.abspath(out))
    return 0


def main() -> int:
    from trainium_lens.harness.runtime import lifeline

    lifeline.hold()  # first: a starter that dies from here on takes this process group with it
    from trainium_lens.harness.torchrun import rank as dist

    dist.tie_to_agent()  # a torchrun rank: dies with the agent (before anything can fork)
    from trainium_lens.harness import reaper

    # Orphans below us (a child in a session of its own, a double-forked daemon)
    # stay ours, and go when the run does: at the end, on SIGTERM, on the lifeline.
    reaper.become_subreaper()
    signal.signal(signal.SIGTERM, _stopped)
    from trainium_lens.harness.runtime.quiet import quiet_kineto

    quiet_kineto()  # before any profile starts: kineto reads it once
    from trainium_lens.harness.events import HarnessError, internal_failure, open_event_stream

    events = open_event_stream()
    from trainium_lens.harness.torchrun.rank import adapt_events

    adapt_events(events)
    try:
        return run(events)
    except HarnessError as exc:
        events.emit(
            "error", kind=exc.kind, message=exc.message, file=exc.file, line=exc.line, traceback=exc.traceback
        )
        return 1
    except SystemExit as exc:  # user code calling sys.exit() must not end us silently
        events.emit(
            "error",
            kind="user_code",
            message=f"user code called sys.exit({exc.code})",
            file=None,
            line=None,
            traceback=traceback.format_exc(),
        )
        return 1
    except BaseException as exc:
        kind, message = internal_failure(exc)
        events.emit(
            "error",
            kind=kind,
            message=message,
            file=None,
            line=None,
            traceback=traceback.format_exc(),
        )
        return 1
    finally:
        try:
            sys.stdout.flush()
        except Exception:
            pass
        reaper.kill_descendants()


def _stopped(signum, _frame) -> None:
    """SIGTERM (a cancel, a timeout): what we started goes first, then we do."""
    from trainium_lens.harness import reaper

    reaper.kill_descendants()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


if __name__ == "__main__":
    sys.exit(main())

"""Per-line Neuron device time from the run's device profile, on the core side: one
path for both flavours (docs/neuron.md, "Device time per line").

* backend ``xla`` (Trn1): the harness (``harness/xla/device.py``) had the runtime
  capture one NTFF per NEFF in model mode, each NEFF's execution in the first
  measured step, and ran ``neuron-explorer view -n NEFF -s NTFF`` per pair;
* backend ``neuron`` (TorchNeuron, Trn2/Trn3) when ``key_averages()`` carried no
  device time: the harness (``harness/eager/neuron_view.py``) ran ``neuron-explorer
  view --session-dir`` on NeuronConfig's session folder, which holds every execution of the
  profiled steps (``NeuronView.steps``; checked against the profile's
  ``ExecutionInfo``, and the figures divided by it).

``fill`` (called by ``finish.py`` once the batch is read) fetches each processed
view when the run was remote, reads every device profile in it
(``traces/neuron_profile.py``), credits instructions to lines through their stack
frames (``traces/neuron_lines.py``) and writes device time into the result
(``device_lines.apply``: clock ``neuron``). Anything that goes wrong (nothing
processed on the host, a fetch that fails, a needed column missing) leaves the
host figures as they are and says why in ``signals.neuron_profile_error`` (a
finding) and ``signals.warnings``: the run is never lost for want of its device
profile.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

from trainium_lens.engine import device_join
from trainium_lens.engine.device_lines import Weighted, apply
from trainium_lens.errors import LensError
from trainium_lens.model.result import NeuronView, Result
from trainium_lens.traces import neuron_lines as nl
from trainium_lens.traces import neuron_profile as npf

Fetch = Callable[[str, Path], Path]


def wanted(result: Result) -> bool:
    """Does this result take its figures from its device profile?"""
    if not result.artifacts.neuron_views:
        return False
    if result.backend == "xla":
        return True
    # TorchNeuron: only when key_averages() had no device time (the harness then
    # processed the device profile; otherwise it lists no views)
    return result.backend == "neuron" and not result.signals.device_time_reported


def fill(result: Result, fetch: Fetch | None = None) -> bool:
    """True when the result now holds device time; False leaves it as it was
    (with the reason in its signals when a device profile was expected)."""
    if not wanted(result):
        return False
    views = result.artifacts.neuron_views
    ready = [v for v in views if v.parquet]
    if not ready:
        reason = next((v.error for v in views if v.error), "no device trace was processed")
        return _keep_host(result, f"no device trace was processed on the host: {reason}")
    local = result.artifacts.location in ("", "local")
    if not local and fetch is None:
        return _keep_host(
            result, f"the device profile is on {result.artifacts.location} and cannot be fetched from here"
        )
    root = (result.artifacts.source_root or "").rstrip("/")
    hlo_lines, phases = _host_names(result)
    with tempfile.TemporaryDirectory(prefix="trainium-lens-neuron-") as tmp:
        read: list[tuple[NeuronView, list[nl.LineReport]]] = []
        folders = []
        try:
            for k, view in enumerate(ready):
                remote = str(view.parquet)
                folder = Path(remote) if fetch is None or local else fetch(remote, Path(tmp) / str(k))
                reports = [nl.line_times(p, hlo_lines, _user(root), phases) for p in npf.read_all(folder)]
                read.append((view, reports))
                folders.append(folder)
        except (LensError, OSError, ValueError, TypeError, KeyError) as exc:
            # NeuronProfileError (a needed column missing) is a ValueError, as are pyarrow's
            # ArrowInvalid (a damaged file); bad values inside the tables raise the others
            return _keep_host(result, _why(exc))
        weighted, notes = _per_step(read)
        apply(result, weighted, root, phases)
        if result.backend == "neuron":  # TorchNeuron's op map, where it wrote one
            notes.append(_join(result, ready, folders, local, fetch, Path(tmp)))
    result.clock = "neuron"
    result.signals.device_time_reported = True
    result.signals.neuron_profile_error = None
    result.signals.warnings.extend(notes)
    return True


def _host_names(result: Result) -> tuple[dict[str, tuple[str, int]], dict[str, str]]:
    """Instruction names the host result ties to lines (``hlo_lines``: the fallback for
    instructions without frames) and to the backward phase (xla: a line's
    ``backward_ops`` name the instructions its forward caused, and its
    ``instructions`` carry their phase)."""
    if result.backend != "xla":
        return {}, {}
    hlo_lines = {
        i.name: (s.file, i.line or s.line) for s in result.lines for i in s.instructions if i.credited
    }
    phases = {i.name: "backward" for s in result.lines for i in s.instructions if i.phase == "backward"}
    for s in result.lines:
        for op in s.backward_ops:
            hlo_lines.setdefault(op.name, (s.file, s.line))
            phases[op.name] = "backward"
    return hlo_lines, phases


def _per_step(read: list[tuple[NeuronView, list[nl.LineReport]]]) -> tuple[list[Weighted], list[str]]:
    """Each report with its factor to per step, and the notes that say which
    executions the figures come from."""
    weighted: list[Weighted] = []
    notes = []
    model = [(v, r) for v, r in read if v.mode != "session"]
    if model:
        weighted += [(r, 1.0) for _v, reports in model for r in reports]
        first = sum(1 for v, _r in model if v.mode == "model-first")
        which = (
            "each graph's execution in the first measured step"
            if not first
            else "each graph's FIRST execution, in the compiling calls (this runtime ignored "
            "NEURON_RT_INSPECT_DEVICE_PROFILE_NUM_WARMUP, documented from SDK 2.33): cold-start "
            "costs are included"
            if first == len(model)
            else f"{first} of them a graph's first (cold) execution, the others the first measured step"
        )
        notes.append(
            f"Neuron device time from {len(model)} device trace(s), one per compiled graph (NEFF), "
            f"runtime model mode: {which}"
        )
    for view, reports in read:
        if view.mode != "session":
            continue
        steps = max(1, view.steps)
        weighted += [(r, 1.0 / steps) for r in reports]
        executions = [e for r in reports for e in r.executions]
        if not executions:
            check = "the profile has no ExecutionInfo to confirm the step count"
        elif nl.repeats(executions, steps):
            check = f"confirmed: its {len(executions)} NEFF executions repeat {steps} times"
        else:
            check = (
                f"NOT confirmed: its {len(executions)} NEFF executions do not form {steps} "
                f"equal steps (the capture may include warm-up or a partial step)"
            )
        notes.append(
            f"Neuron device time from the TorchNeuron session profile: every execution of the "
            f"{steps} profiled step(s), divided by {steps} ({check})"
        )
    if not any(r.framed for _v, reports in read for r in reports):
        notes.append(
            "the device profile's instructions name no stack frames: their NEFFs were compiled "
            "without NEURON_FRAMEWORK_DEBUG=1 (the harness sets it; NEFFs already cached keep "
            "none: clear the NEFF cache to recompile); only names the host knows reach a line"
        )
    schemas = sorted({r.schema or "not stated" for _v, reports in read for r in reports})
    notes.append(f"device profile schema {', '.join(schemas)}; the self (cpu) columns keep the host time")
    return weighted, notes


def _why(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    if isinstance(exc, (npf.NeuronProfileError, LensError)):
        return text
    return f"cannot read the device profile: {type(exc).__name__}: {text}"


def _join(
    result: Result, views: list[NeuronView], folders: list[Path], local: bool, fetch: Fetch | None, tmp: Path
) -> str:
    """TorchNeuron's exact join over the stack-frame figures; a map or trace it cannot
    read leaves those figures and says why (never the run's loss)."""
    steps = max(1, max((v.steps for v in views if v.mode == "session"), default=1))
    try:
        trace = _trace(result, local, fetch, tmp)
        return device_join.place(result, [f for f in folders if f.is_dir()], steps, trace)
    except (LensError, OSError, ValueError, TypeError, KeyError) as exc:
        return f"TorchNeuron's op map not used ({_why(exc)}): device time through the stack frames"


def _trace(result: Result, local: bool, fetch: Fetch | None, tmp: Path) -> Path | None:
    """The run's tagged trace here (fetched from the run's host when remote)."""
    where = result.artifacts.trace
    if not where:
        return None
    if local or fetch is None:
        return Path(where) if Path(where).is_file() else None
    return fetch(where, tmp / "trace.json")


def _user(root: str) -> Callable[[str], bool]:
    def is_user(file: str) -> bool:
        inside = not root or file.startswith(root + "/")
        return inside and not nl.is_library(file[len(root) :] if root else file)

    return is_user


def _keep_host(result: Result, reason: str) -> bool:
    result.signals.neuron_profile_error = reason
    result.signals.warnings.append(
        f"no per-line Neuron device time ({reason}); the figures are {result.clock} host time"
    )
    return False

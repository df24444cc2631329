"""Backend ``xla``: torch-xla (Trn1's torch-neuronx, or any torch-xla install).

XLA tensors are lazy: ops are recorded, ``torch_xla.sync()`` cuts a graph, the
compiler turns it into one executable and the device runs HLO instructions,
not ATen ops. So this backend has its own protocol (``profile_function``):

1. ``prepare_env`` (before torch_xla loads): ``XLA_IR_DEBUG=1 XLA_HLO_DEBUG=1``
   so every HLO instruction carries its Python stack, ``PJRT_DEVICE=CPU`` when
   no device is named and this is not a Neuron host, and a fresh Neuron compile
   cache (cached executables ignore changed metadata).
2. Compile: the first calls, each followed by a sync (compiles land here).
3. ``wait`` + ``warmup`` steps unprofiled, then ``active`` steps inside
   ``torch_xla.debug.profiler`` ``start_trace``/``stop_trace``, each step's call
   scoped by ``xp.Trace`` (its marker tells the steps apart), then
   ``torch_xla.sync()`` and ``wait_device_ops()`` outside the scope.
4. ``xla/xplane.py`` reads the exported xplane (executed instructions + optimized
   HLO), ``xla/attribution.py`` and ``xla/credit.py`` map them to lines.

The clock is host time per executed instruction: ``xla-cpu`` on torch-xla's CPU
device (PJRT CPU thunks), never called device time. On a Neuron device (Trn1)
the runtime also captures the first measured step of each NEFF and
``xla/device.py`` runs ``neuron-explorer view`` on it; the core side
(``trainium_lens.engine.device_profile``) turns that into per-line device time (clock
``neuron``), or keeps these host figures and says why.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
import time
from typing import Any

from trainium_lens.harness.eager.backends import Backend
from trainium_lens.harness.xla.device import DeviceCapture, capture_env, files
from trainium_lens.harness.xla.xplane import STEP_MARKER

DEBUG_ENV = {"XLA_IR_DEBUG": "1", "XLA_HLO_DEBUG": "1", "NEURON_FRAMEWORK_DEBUG": "1"}
SETUP_HINT = "run scripts/setup-xla.sh and pass --python .venv-xla/bin/python"


def unavailable_reason() -> str | None:
    if importlib.util.find_spec("torch_xla") is None:
        return f"torch_xla is not installed in {sys.executable}: {SETUP_HINT}"
    return None


# One per harness process (a batch): the backward tag ids (xla/tags.py, TagTable)
_TAG_TABLE: Any = None

# (run dir, protocol) for the Trn1 device capture, kept by ``prepare_env`` until the
# backend is known to be xla (``XlaBackend`` sets the capture up before the PJRT
# client, and with it the Neuron runtime, starts)
_PENDING_CAPTURE: tuple[str, dict] | None = None


def prepare_env(run_dir: str, protocols: list[dict] | None = None) -> None:
    """Set before torch_xla (or torch-neuronx, which imports it) loads. Harmless
    when ``auto`` ends up on another backend (nothing here reads them then).
    ``protocols``: the batch's, for the device capture's warm-up count (the
    smallest: the profiled execution then always comes after the compiling calls)."""
    global _PENDING_CAPTURE
    first = min(protocols or [{}], key=lambda p: int(p.get("wait", 0)) + int(p.get("warmup", 0)))
    _PENDING_CAPTURE = (run_dir, first)
    os.environ.update(DEBUG_ENV)
    if "PJRT_DEVICE" not in os.environ and importlib.util.find_spec("torch_neuronx") is None:
        os.environ["PJRT_DEVICE"] = "CPU"
    cache = os.path.join(os.path.abspath(run_dir), "xla-compile-cache")
    os.makedirs(cache, exist_ok=True)
    os.environ["NEURON_COMPILE_CACHE_URL"] = cache  # torch-neuronx's (XLA flavour) NEFF cache


def prepare_neuron_capture(run_dir: str, protocol: dict) -> DeviceCapture | None:
    """Once the backend is xla, before the first execution starts the Neuron runtime:
    device capture on Trn1 (``xla/device.py``: model mode, the first measured step of
    each NEFF). Not in ``prepare_env``: on a native TorchNeuron host runtime
    inspect would clash with torch.profiler. No torch.profiler runs in this
    backend, so that clash does not apply here. None: not a Neuron host."""
    if importlib.util.find_spec("torch_neuronx") is None:
        return None
    for key, value in capture_env(run_dir, protocol).items():
        os.environ.setdefault(key, value)
    return DeviceCapture(
        os.environ["NEURON_RT_INSPECT_OUTPUT_DIR"], os.environ.get("NEURON_COMPILE_CACHE_URL")
    )


class XlaBackend(Backend):
    name = "xla"
    device = "xla"
    device_clock = True

    def __init__(self, torch: Any):
        super().__init__(torch)
        import torch_xla
        import torch_xla.core.xla_model as xm
        import torch_xla.debug.metrics as met
        import torch_xla.debug.profiler as xp

        torch_xla._XLAC._set_ir_debug(True)  # frames even if the env came too late
        self.torch_xla, self.xm, self.xp, self.met = torch_xla, xm, xp, met
        # before torch_xla.device(): creating the PJRT client starts the Neuron runtime,
        # which reads its NEURON_RT_INSPECT_* settings then
        self.device_capture = prepare_neuron_capture(*_PENDING_CAPTURE) if _PENDING_CAPTURE else None
        self.device = str(torch_xla.device())
        try:
            import torch_xla.runtime as xr

            self.device_type = str(xr.device_type() or "CPU")
        except Exception:
            self.device_type = os.environ.get("PJRT_DEVICE", "CPU")

    @property
    def clock(self) -> str:
        return f"xla-{self.device_type.lower()}"

    def sync(self) -> None:
        self.torch_xla.sync()
        self.xm.wait_device_ops()

    @contextlib.contextmanager
    def plain_tracing(self) -> Any:
        """The unprofiled wall traced as the user's run traces it: without the Python
        stack that ``XLA_IR_DEBUG`` captures for every IR node (the costly part of the
        debug environment: tracing is Python, per op, every step) and without the
        backward tags (the timing calls run outside the tagger). The metadata is not
        part of the graph's hash, so the executable compiled with it is reused: no
        recompile (measured on nanoGPT's step, torch-xla 2.9 CPU: 0 compiles; docs/xla.md)."""
        setter = getattr(self.torch_xla._XLAC, "_set_ir_debug", None)
        if setter is None:
            yield
            return
        setter(False)
        try:
            yield
        finally:
            setter(True)

    def compiles(self) -> int:
        data = self.met.metric_data("CompileTime")
        return int(data[0]) if data else 0

    def executions(self) -> int:
        """Graphs torch-xla has executed so far, counted when the host hands them to the
        runtime: at the sync that ends a step, not when they run (``xla/syncs.py``)."""
        from trainium_lens.harness.xla.syncs import scheduled

        return int(scheduled(self.met.counter_value))

    def artifacts(self, run_dir: str) -> dict:
        """On Neuron: the NEFFs this run compiled (the fresh cache holds only them;
        docs/xla.md: MODULE_*/model.neff) and the NTFFs the runtime captured, for Neuron
        Explorer and ``neuron-explorer view -n NEFF -s NTFF --output-file DIR``."""
        folders = [os.environ.get(k) for k in ("NEURON_COMPILE_CACHE_URL", "NEURON_RT_INSPECT_OUTPUT_DIR")]
        neffs = [f for folder in folders for f in files(folder, ".neff")]
        ntffs = [f for folder in folders for f in files(folder, ".ntff")]
        if not neffs and not ntffs:
            return {}
        # The compile cache names a NEFF model.neff (no hash to pair by): list NEFFs
        # and NTFFs as found; neuron-explorer is told which pair to view.
        pairs = [{"neff": n, "ntff": None} for n in neffs] + [{"neff": None, "ntff": t} for t in ntffs]
        inspect = os.environ.get("NEURON_RT_INSPECT_OUTPUT_DIR")
        return {
            "neuron_profile_dir": inspect
            if ntffs and inspect
            else os.environ.get("NEURON_COMPILE_CACHE_URL"),
            "neff_ntff": pairs,
        }

    def environment(self) -> dict:
        env = super().environment()
        env["device_name"] = f"torch-xla {getattr(self.torch_xla, '__version__', '')} PJRT {self.device_type}"
        if self.neuron_flavour:
            try:
                from importlib import metadata

                env["torch_neuronx"] = metadata.version("torch-neuronx")
            except Exception:
                pass
        return env


def _steps(
    s: Any,
    fn: Any,
    args: tuple,
    kwargs: dict,
    count: int,
    name: str,
    marker: bool,
    first: int = 0,
    tagger: Any = None,
    graphs: list[int] | None = None,
) -> list[float]:
    """``count`` calls, each synced; a profiled step (``marker``) is scoped by
    ``xp.Trace`` and reports its stage. ``tagger``: the mode the call runs under
    (``xla/tags.py``); ``graphs``: gets the graphs each call executed."""
    from trainium_lens.harness.runtime.call import invoke

    backend, times = s.backend, []
    for i in range(count):
        if marker:
            s.events.stage("profile", name, f"step {first + i + 1}", step=first + i + 1, of=first + count)
        executed = backend.executions()
        t0 = time.perf_counter()
        try:
            # The output stays referenced until the sync: a lazy tensor nobody holds
            # is never computed (the sync would find nothing to run).
            with backend.xp.Trace(f"{STEP_MARKER}{i}") if marker else _nothing():
                with tagger if tagger is not None else _nothing():
                    out = invoke(fn, args, kwargs)
            backend.sync()  # outside the Trace scope: a sync inside it is not supported
            del out
        except Exception as exc:
            raise s.user.error_from(exc, "user_code", name) from None
        times.append((time.perf_counter() - t0) * 1e6)
        if graphs is not None:
            graphs.append(backend.executions() - executed)
    return times


@contextlib.contextmanager
def _nothing():
    yield


def profile_function(s: Any, marked: Any, index: int, protocol: dict) -> dict:
    from trainium_lens.harness.runtime.call import (
        function_record,
        inputs,
        invoke,
        marked_function,
        output,
        variant_key,
    )
    from trainium_lens.harness.xla import result, run_warnings
    from trainium_lens.harness.xla.tags import StepTagger, TagTable

    ev, name, spec, backend = s.events, marked.name, s.spec, s.backend
    run_id = f"{spec.batch_id}-{index}"
    fn = marked_function(s, marked)
    device = backend.device_capture
    if device is not None:
        device.mark()
    ev.stage("inputs", name, "preparing inputs (on the xla device)")
    args, kwargs = inputs(s, marked, fn)
    stale = run_warnings.stale_optimizers([*args, *kwargs.values()], backend.device)
    for w in stale:
        ev.warning(f"{name}: {w}")
    # on from the first call: the graph compiled then keeps the backward tags (tags.py)
    global _TAG_TABLE
    _TAG_TABLE = _TAG_TABLE or TagTable()
    tagger = StepTagger(s.user.relpath, invoke.__code__, table=_TAG_TABLE)

    ev.stage("compile", name, "first calls (the graph compiles here, outside the measured steps)")
    try:
        with tagger:
            first = invoke(fn, args, kwargs)
        backend.sync()
    except Exception as exc:
        raise s.user.error_from(exc, "user_code", name) from None
    first_output = output(s, name, first, variant_key(marked))
    del first
    _steps(s, fn, args, kwargs, 1, name, marker=False, tagger=tagger)
    compiles0 = backend.compiles()  # from here on, a compile means the graph changed

    unwatched = protocol["wait"] + protocol["warmup"]
    _steps(s, fn, args, kwargs, unwatched, name, marker=False, tagger=tagger)
    log_dir = os.path.join(spec.run_dir, f"{run_id}.xla-profile")
    if device is not None:
        device.before_measured()  # an NTFF already here holds a cold execution (device.py)
    at_active = backend.compiles()
    graphs: list[int] = []
    tagger.counting = True
    backend.xp.start_trace(log_dir)
    try:
        step_wall = _steps(s, fn, args, kwargs, protocol["active"], name, True, tagger=tagger, graphs=graphs)
    finally:
        backend.xp.stop_trace()
        tagger.counting = False
    compiles_active = backend.compiles() - at_active

    ev.stage("export", name, "joining executed HLO instructions with their source lines")
    window = result.read_window(
        log_dir,
        device is not None,
        s.user.relpath,
        tagger,
        s.source.line,
        os.path.join(spec.run_dir, f"{run_id}.trace.json"),
    )

    ev.stage("timing", name, f"{protocol['timing_calls']} unprofiled calls")
    with backend.plain_tracing():
        # one call first: a graph traced without the frames could still compile once
        _steps(s, fn, args, kwargs, 1, name, marker=False)
        plain = _steps(s, fn, args, kwargs, protocol["timing_calls"], name, marker=False)
    views = result.device_views(device, os.path.join(spec.run_dir, f"{run_id}.neuron-view"))
    warnings = result.warnings_of(window, views, backend, tagger, name)
    for w in warnings:
        ev.warning(f"{name}: {w}")
    return result.document(
        window,
        run_id=run_id,
        batch_id=spec.batch_id,
        host=spec.host,
        backend=backend,
        function=function_record(s, marked, protocol),
        wall_us=plain,
        step_wall_us=step_wall,
        graphs=graphs,
        tagger=tagger,
        compiles_in_active_steps=compiles_active,
        recompiles=backend.compiles() - compiles0,
        warnings=stale + warnings,
        views=views,
        run_dir=spec.run_dir,
        workspace_root=spec.workspace_root,
        output=first_output,
    )

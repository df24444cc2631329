"""Line attribution around torch.compile adds no graph, recompile or graph break.

In-process (the harness modules imported directly) so the compile counters of
dynamo can be read before and after: the labelled calls must compile nothing;
the control (the mode alone, without the hook that lifts it around compiled
calls) shows that the check can fail — dynamo then tries a recompile.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from tests.support.harness import line_of
from trainium_lens.harness.runtime import call

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def compiled_setup():
    import torch

    from trainium_lens.harness.eager import run
    from trainium_lens.harness.eager.compiled import CompileWatch
    from trainium_lens.harness.eager.lines import LineLabeler
    from trainium_lens.harness.job.loader import UserCode, load_module

    user = UserCode(str(ROOT))
    module = load_module(str(ROOT / "examples" / "rmsnorm.py"), str(ROOT), "examples/rmsnorm.py")
    watch = CompileWatch(user)
    watch.install()
    args = module.make_inputs()
    call.invoke(module.rms_norm_compiled, args, {})  # compiles once
    labeler = LineLabeler(user, call.invoke.__code__)
    labeler.hook.refresh()
    labeler.hook.arm_if_called(lambda: call.invoke(module.rms_norm_compiled, args, {}))
    return torch, run, module, watch, labeler, args


def test_labelled_calls_compile_nothing(compiled_setup):
    torch, run, module, watch, labeler, args = compiled_setup
    assert labeler.hook.enabled  # the function was seen calling compiled code
    before = watch.counters()
    assert before["compiles"] >= 1
    with torch.profiler.profile() as prof:
        for _ in range(3):
            with labeler:
                call.invoke(module.rms_norm_compiled, args, {})
    assert watch.counters() == before
    assert watch.recompiles() == 0
    names = [e.name for e in prof.events()]
    regions = [n for n in names if n.startswith("Torch-Compiled Region")]
    assert len(regions) == 3
    # the region sits inside the calling line's range
    line = next(
        i
        for i, t in enumerate((ROOT / "examples/rmsnorm.py").read_text().splitlines(), 1)
        if "return _compiled_naive(" in t
    )
    parents = {
        e.cpu_parent.name
        for e in prof.events()
        if e.name.startswith("Torch-Compiled Region") and e.cpu_parent is not None
    }
    assert parents == {f"examples/rmsnorm.py({line}): rms_norm_compiled"}
    # graph covered lines were read from the FX graph
    graph = watch.covered(regions[0])
    assert graph is not None and graph["nodes"] >= 4 and len(graph["lines"]) == 4


def test_control_mode_without_the_hook_would_recompile(compiled_setup):
    torch, run, module, watch, labeler, args = compiled_setup
    before = watch.counters()["compiles"]
    try:
        with labeler.mode:  # the mode alone: dynamo sees it on the mode stack
            call.invoke(module.rms_norm_compiled, args, {})
    except Exception:
        pass  # fullgraph=True: tracing the mode's frame walk is unsupported
    assert watch.counters()["compiles"] > before


def test_compile_signals_recompiles_and_graph_breaks(tmp_path):
    import json

    from tests.support.harness import line_of, run_harness
    from trainium_lens.model.result import Batch

    data = ROOT / "tests" / "data"
    run_dir = tmp_path / "run"
    code, events, stderr = run_harness(
        data, "compiles.py", run_dir, protocol={"wait": 1, "warmup": 0, "active": 2, "timing_calls": 1}
    )
    assert code == 0, stderr[-3000:]
    batch = Batch.from_dict(json.loads((run_dir / "batch.json").read_text()))
    grows, breaks = batch.results
    # every call is a new shape: first calls, the settling call (settling stops at a
    # compile: no steady state to wait for), then every call of every measured
    # pair (labelled + plain) compiles inside the measured steps
    st = grows.stability
    assert st.settle_calls == 1
    assert grows.signals.compiles_in_active_steps == 2 * st.steps_measured * st.calls_per_step
    assert grows.signals.recompiles >= 6 and grows.signals.graph_breaks == 0
    region_lines = {r.line for r in grows.regions}
    assert region_lines == {line_of(data / "compiles.py", "GROWS-CALL")}
    assert breaks.signals.graph_breaks >= 1 and breaks.signals.compiles_in_active_steps == 0
    assert breaks.signals.recompiles == 0
    assert len({r.name for r in breaks.regions}) >= 2  # the graph split in two
    assert {r.line for r in breaks.regions} == {line_of(data / "compiles.py", "BREAKS-CALL")}


LAZY = """
import importlib.util, json, sys
import torch
from trainium_lens.harness.eager.compiled import CompileWatch
from trainium_lens.harness.job.loader import UserCode, load_module

assert "torch._dynamo" not in sys.modules, "this check needs dynamo not yet imported"
root = sys.argv[1]
watch, other = CompileWatch(UserCode(root)), CompileWatch(UserCode(root))
watch.install()  # dynamo not loaded: nothing to hook yet
other.install()  # a second watch (a second session in one process) waits too
before = watch.installed
importlib.util.find_spec("torch._dynamo")  # a lookup, no import: the wait goes on
module = load_module(root + "/tests/data/lazy_compiled.py", root, "tests/data/lazy_compiled.py")
module.lazily_compiled(*module.make_inputs())  # imports dynamo, then compiles
print(json.dumps({"before": before, "after": [watch.installed, other.installed],
                  "counters": [watch.counters(), other.counters()],
                  "covered": watch.covered("Torch-Compiled Region: 0/0")}))
"""


def test_a_compile_on_the_first_call_is_watched_from_its_first_graph():
    """torch.compile inside the marked function (dynamo imported by the first call, after
    the watch's install): its first graph is counted and its lines read all the same.
    Installed only after the first call, the region had no covered lines."""
    done = subprocess.run(
        [sys.executable, "-c", LAZY, str(ROOT)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT / "server")},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert (seen["before"], seen["after"]) == (False, [True, True])
    assert [c["compiles"] for c in seen["counters"]] == [1, 1]
    src = ROOT / "tests" / "data" / "lazy_compiled.py"
    rel = "tests/data/lazy_compiled.py"
    assert seen["covered"]["lines"] == [[rel, line_of(src, m)] for m in ("SQUARE", "MEAN", "SCALE")]

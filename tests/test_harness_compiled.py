"""Line attribution around torch.compile adds no graph, recompile or graph break.

In-process (the harness modules imported directly) so the compile counters of
dynamo can be read before and after: the labelled calls must compile nothing;
the control (the mode alone, without the hook that lifts it around compiled
calls) shows that the check can fail — dynamo then tries a recompile.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def compiled_setup():
    import torch

    from trainium_lens.harness import run
    from trainium_lens.harness.compiled import CompileWatch
    from trainium_lens.harness.lines import LineLabeler
    from trainium_lens.harness.loader import UserCode, load_module

    user = UserCode(str(ROOT))
    module = load_module(str(ROOT / "examples" / "rmsnorm.py"), str(ROOT), "examples/rmsnorm.py")
    watch = CompileWatch(user)
    watch.install()
    args = module.make_inputs()
    run.invoke(module.rms_norm_compiled, args, {})  # compiles once
    labeler = LineLabeler(user, run.invoke.__code__)
    labeler.hook.refresh()
    labeler.hook.arm_if_called(lambda: run.invoke(module.rms_norm_compiled, args, {}))
    return torch, run, module, watch, labeler, args


def test_labelled_calls_compile_nothing(compiled_setup):
    torch, run, module, watch, labeler, args = compiled_setup
    assert labeler.hook.enabled  # the function was seen calling compiled code
    before = watch.counters()
    assert before["compiles"] >= 1
    with torch.profiler.profile() as prof:
        for _ in range(3):
            with labeler:
                run.invoke(module.rms_norm_compiled, args, {})
    assert watch.counters() == before
    assert watch.recompiles() == 0
    names = [e.name for e in prof.events()]
    regions = [n for n in names if n.startswith("Torch-Compiled Region")]
    assert len(regions) == 3
    # the region sits inside the calling line's range
    line = next(i for i, t in enumerate((ROOT / "examples/rmsnorm.py").read_text().splitlines(), 1)
                if "return _compiled_naive(" in t)
    parents = {e.cpu_parent.name for e in prof.events()
               if e.name.startswith("Torch-Compiled Region") and e.cpu_parent is not None}
    assert parents == {f"examples/rmsnorm.py({line}): rms_norm_compiled"}
    # graph covered lines were read from the FX graph
    graph = watch.covered(regions[0])
    assert graph is not None and graph["nodes"] >= 4 and len(graph["lines"]) == 4


def test_control_mode_without_the_hook_would_recompile(compiled_setup):
    torch, run, module, watch, labeler, args = compiled_setup
    before = watch.counters()["compiles"]
    try:
        with labeler.mode:  # the mode alone: dynamo sees it on the mode stack
            run.invoke(module.rms_norm_compiled, args, {})
    except Exception:
        pass  # fullgraph=True: tracing the mode's frame walk is unsupported
    assert watch.counters()["compiles"] > before

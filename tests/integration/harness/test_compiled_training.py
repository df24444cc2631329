"""A compiled training step: the compiled backward sits on its forward line.

AOTAutograd runs a compiled module's backward as one autograd node,
``CompiledFunctionBackward``, whose inductor kernels record no op events of
their own. The harness measures that node like a forward region and links it,
by its ``sequence_nr``, to the ``CompiledFunction`` range of the forward — on
the line that called the compiled model. The fixture makes any recompile an
error (``torch._dynamo.config.error_on_recompile``): the labelled twin steps
must leave dynamo's guards alone for the plain ones.
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import ROOT
from tests.support.harness import line_of, run_harness
from trainium_lens.model.result import Batch

pytestmark = pytest.mark.slow

DATA = ROOT / "tests" / "data"
FILE = DATA / "compiled_training.py"


@pytest.fixture(scope="module")
def compiled_step(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("ctrain") / "run"
    code, events, stderr = run_harness(
        DATA, "compiled_training.py", run_dir, protocol={"active": 3, "timing_calls": 5}, backend="cpu"
    )
    assert code == 0, stderr[-3000:] + json.dumps(events[-3:])
    (result,) = Batch.from_dict(json.loads((run_dir / "batch.json").read_text())).results
    return result, events


def test_compiled_backward_lands_on_the_forward_line(compiled_step):
    r, _events = compiled_step
    fwd_line = line_of(FILE, "FORWARD-LINE")
    fwd = r.line("compiled_training.py", fwd_line)
    assert fwd is not None and fwd.backward_self_time_us > 0
    assert any(op.node == "CompiledFunctionBackward" for op in fwd.backward_ops)
    # the compiled backward is on the forward line, none of it on loss.backward()'s
    # (what share of the step each holds is a timing: bench/, not here)
    compiled = [s for s in r.lines if any(op.node == "CompiledFunctionBackward" for op in s.backward_ops)]
    assert [(s.file, s.line) for s in compiled] == [("compiled_training.py", fwd_line)]
    regions = {reg.phase: reg for reg in r.regions}
    assert set(regions) == {"forward", "backward"}
    back = regions["backward"]
    assert back.name.startswith("CompiledFunctionBackward (Torch-Compiled Region:")
    assert (back.file, back.line) == ("compiled_training.py", fwd_line)
    # covered lines: the forward graph's (the backward is derived from its nodes)
    covered = {(c.file, c.line) for c in back.covered_lines}
    assert ("compiled_training.py", line_of(FILE, "ATTENTION-LINE")) in covered
    assert covered == {(c.file, c.line) for c in regions["forward"].covered_lines}


def test_twin_steps_leave_dynamo_alone(compiled_step):
    r, events = compiled_step
    # error_on_recompile: a recompile would have failed the run; none counted either
    assert r.signals.recompiles == 0 and r.signals.compiles_in_active_steps == 0
    assert r.signals.graph_breaks == 0
    # labelled and plain twins ran the same ops (same compiled regions), step by step
    assert not [e for e in events if e["event"] == "warning" and "different ops" in e["message"]]

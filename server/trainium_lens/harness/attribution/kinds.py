"""What each profiler event is to the attribution pass (an op, a compiled region, a
line label, a step, a backward node, an optimizer range) and the phases its time
goes to. ``tree.py`` (the pass's entry) and ``walk.py`` (the pass) read them."""

from __future__ import annotations

OTHER, OP, REGION, STEP, LABEL, BACKWARD, OPTIM, CLOSURE = 0, 1, 2, 3, 4, 5, 6, 7
FWD, BWD, RECOMPUTE, OPTIMIZER = 0, 1, 2, 3  # phases (OPTIMIZER: totals only)
PHASES = ("forward", "backward", "recompute", "optimizer")
MAX_WINDOWS = 256  # per line: enough to place a line on the timeline, bounded memory
MERGE_GAP_US = 1.0
REGION_PREFIX = "Torch-Compiled Region"
# AOTAutograd's compiled backward: inductor's kernels run inside it with no op
# event of their own, so it is measured like a forward region (its self time)
COMPILED_BACKWARD = "CompiledFunctionBackward"
BACKWARD_PREFIX = "autograd::engine::evaluate_function: "
OPTIM_PREFIXES = ("Optimizer.step#", "Optimizer.zero_grad#")
# the closure an optimizer's step calls (``optimizer.step(closure)``: Lightning's
# forward and backward, LBFGS's re-evaluations), in a range of the harness's own
# (``script/detect.py``): its ops are the model's, not the optimizer's
CLOSURE_RANGE = "trainium_lens: optimizer closure"
_NOT_OPS = frozenset({"profiler", "torch", "autograd"})


def classify(name: str, labels: dict) -> int:
    if name in labels:
        return LABEL
    if name.startswith("ProfilerStep"):
        return STEP
    if name.startswith(REGION_PREFIX) or name == COMPILED_BACKWARD:
        return REGION
    if name.startswith(BACKWARD_PREFIX):
        return BACKWARD
    if name.startswith(OPTIM_PREFIXES):
        return OPTIM
    if name == CLOSURE_RANGE:
        return CLOSURE
    i = name.find("::")
    if i > 0 and " " not in name[:i] and name[:i] not in _NOT_OPS:
        return OP
    return OTHER

"""The backward tagger (harness/xla/tags.py) on real torch.autograd, CPU tensors:
each autograd node a user line created gets a post-hook that names that line's
tag on the gradients the node produces; a gradient passed through unchanged is
left alone; host syncs and fallbacks are counted per line from the counters.
A stand-in records what torch_xla._XLAC would have been told (no torch-xla in
this venv; the real thing runs in tests/integration/harness/test_xla_nanogpt.py)."""

from __future__ import annotations

import torch

from trainium_lens.harness.xla.syncs import LOCAL_SCALAR
from trainium_lens.harness.xla.tags import DEPTH, TAG_PREFIX, StepTagger, tag_of


class StandInXLAC:
    """Records the prefixes set; counters move when ``bump`` says so."""

    def __init__(self) -> None:
        self.prefixes: list[tuple[tuple, str, int]] = []
        self.counts: dict[str, int] = {}
        self.fallen: list[str] = []

    def _set_xla_custom_op_name_prefix(self, t, prefix, depth):
        self.prefixes.append((tuple(t.shape), prefix, depth))
        return True

    def _xla_counter_value(self, name):
        return self.counts.get(name)

    def _get_executed_fallback_ops(self):
        return list(self.fallen)

    def bump(self, name: str, n: int = 1) -> None:
        self.counts[name] = self.counts.get(name, 0) + n
        if name.startswith("aten::") and name not in self.fallen:
            self.fallen.append(name)


def relpath(filename: str) -> str | None:
    return "test_tags.py" if filename == __file__ else None


def line_of(tag: str) -> int:
    marker = f"# {tag}"
    with open(__file__) as fh:
        return next(i for i, text in enumerate(fh, 1) if text.rstrip().endswith(marker))


def step(w, b, x):
    h = torch.relu(x @ w)  # LINE-H
    y = h + b  # LINE-Y
    return y.sum()  # LINE-LOSS


def test_each_node_tags_its_own_gradients_with_its_forward_line():
    xlac = StandInXLAC()
    tagger = StepTagger(relpath, None, xla=xlac)
    w = torch.randn(4, 3, requires_grad=True)
    b = torch.randn(3, requires_grad=True)
    x = torch.randn(2, 4)
    with tagger:
        loss = step(w, b, x)
        loss.backward()
    nodes = {tagger.tags[i][1]: tagger.tags[i][0][0][1] for i in range(len(tagger.tags))}
    assert nodes["MmBackward0"] == nodes["ReluBackward0"] == line_of("LINE-H")
    assert nodes["AddBackward0"] == line_of("LINE-Y") and nodes["SumBackward0"] == line_of("LINE-LOSS")
    assert tagger.tags[0][0][-1][2] == "test_each_node_tags_its_own_gradients_with_its_forward_line"
    by_prefix: dict[str, list[tuple]] = {}
    for shape, prefix, depth in xlac.prefixes:
        assert depth == DEPTH and prefix.startswith(TAG_PREFIX)
        by_prefix.setdefault(tagger.tags[tag_of(prefix + "x")][1], []).append(shape)
    # MmBackward0 made dW (4, 3) (x needs no grad); ReluBackward0 its input's gradient (2, 3)
    assert by_prefix["MmBackward0"] == [(4, 3)] and by_prefix["ReluBackward0"] == [(2, 3)]
    # AddBackward0 passes the gradient through to h unchanged: not re-tagged (it would
    # take SumBackward0's instructions); b's reduced gradient (3,) is its own work
    assert by_prefix["AddBackward0"] == [(3,)]
    assert by_prefix["SumBackward0"] == [(2, 3)]


def test_nodes_are_hooked_once_even_when_several_calls_reach_them():
    xlac = StandInXLAC()
    tagger = StepTagger(relpath, None, xla=xlac)
    w = torch.randn(4, 3, requires_grad=True)
    with tagger:
        a = w * 2  # LINE-A
        c = a + a  # LINE-C
        c.sum().backward()
    assert [t[1] for t in tagger.tags] == ["MulBackward0", "AddBackward0", "SumBackward0"]
    # one hook per node, however many walks reached it; AddBackward0 of a + a passes
    # the gradient through to both inputs unchanged: nothing of its own to tag
    assert sorted(p for _s, p, _d in xlac.prefixes) == [f"{TAG_PREFIX}0/", f"{TAG_PREFIX}2/"]


def test_syncs_and_fallbacks_are_counted_per_line_from_the_counters():
    """What the mode does around each call of a measured step: counters before, the
    call, counters after (the calls themselves: the real mode on torch-xla in the
    integration test)."""
    xlac = StandInXLAC()
    tagger = StepTagger(relpath, None, xla=xlac)
    place = ("m.py", 7, "step")
    before = tagger.syncs.counts()
    xlac.bump("CachedCompile")  # what .item() does mid-step: run the graph so far...
    xlac.bump(LOCAL_SCALAR)  # ...and copy one scalar (a "fallback" to torch-xla's counters)
    xlac.bump("xla::_to_cpu")
    tagger.syncs.note(place, "item", before)
    before = tagger.syncs.counts()
    xlac.bump("aten::nonzero", 2)
    tagger.syncs.note(("m.py", 9, "step"), "nonzero", before)
    before = tagger.syncs.counts()
    tagger.syncs.note(("m.py", 11, "step"), "add", before)  # nothing moved: nothing noted
    before = tagger.syncs.counts()
    # the runtime running the graph an earlier sync sent (a MpDeviceLoader's, at each batch)
    # bumps ExecuteComputation during whatever call comes next: not a sync of that call
    xlac.bump("ExecuteComputation")
    tagger.syncs.note(("m.py", 13, "step"), "arange", before)
    signals = tagger.syncs.signals(steps=2)
    [sync] = signals["host_syncs"]
    assert sync == {
        "file": "m.py",
        "line": 7,
        "calls": 0.5,
        "graphs": 0.5,
        "transfers": 0.5,
        "what": ["item"],
    }
    assert signals["xla_fallbacks"] == [{"op": "aten::nonzero", "file": "m.py", "line": 9, "calls": 1.0}]

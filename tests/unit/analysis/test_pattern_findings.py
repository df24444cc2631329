"""Fused-op patterns and the dispatch hint's limits, on results built by hand.

The op lists are what the harness records for the code quoted in each line's
text (the direct ops of GPT-2's ``NewGELUActivation``: four ``mul``, a ``pow``,
two ``add`` and a ``tanh`` per execution); the real model runs in
tests/integration/harness/test_advice.py.
"""

from __future__ import annotations

from tests.unit.analysis.test_findings_and_compare import NAIVE, line, result
from trainium_lens.analysis.findings.analyze import analyze
from trainium_lens.analysis.findings.patterns import GELU_TANH

GELU_OPS = [
    ("aten::mul", 4, 40.0),
    ("aten::pow", 1, 12.0),
    ("aten::add", 2, 18.0),
    ("aten::tanh", 1, 15.0),
]
GELU_TEXT = (
    "return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))"
)


def direct(ln):
    """Mark every op of a hand-built line as dispatched by the line itself."""
    for op in ln["ops"]:
        op["direct_calls"] = op["calls"]
    return ln


def test_tanh_gelu_written_out_gets_its_fused_op_by_name():
    lines = [
        direct(line(30, "h = x @ w1", [("aten::mm", 1, 300.0)], function="mlp")),
        direct(line(31, GELU_TEXT, GELU_OPS, function="mlp")),
    ]
    found = analyze(result(lines))
    fused = [f for f in found if f.kind == "fused_op"]
    assert (
        len(fused) == 1 and fused[0].line == 31 and fused[0].candidate == GELU_TANH and fused[0].fix is None
    )
    assert "line 31 of mlp() computes the tanh GELU op by op: 8 dispatches per call" in fused[0].message
    assert 'activation_function="gelu_pytorch_tanh"' not in fused[0].message  # not transformers' code


def test_a_gelu_inside_transformers_is_named_where_it_runs_and_not_told_to_fuse():
    act = direct(line(242, "hidden_states = self.act(hidden_states)", GELU_OPS, function="GPT2MLP.forward"))
    act.update(via_library=1.0, library_modules=["transformers.activations"], hits=2.0)
    for op in act["ops"]:
        op["calls"] *= 2
        op["direct_calls"] *= 2
    fc = direct(line(241, "hidden_states = self.c_fc(hidden_states)", [("aten::addmm", 2, 300.0)]))
    fc["hits"] = 2.0  # one addmm per execution
    lines = [fc, act]
    found = analyze(result(lines))
    # no "fuse these dispatches" hint, and no pattern summing the library call's ops
    assert [(f.kind, f.line) for f in found] == [("library_pattern", 242)]
    message = found[0].message
    assert "Ops of the tanh GELU op by op" in message and "ran inside transformers" in message
    assert "--include transformers" in message
    assert "dispatches" not in message and "µs" not in message  # the figures are the whole call's
    assert 'in transformers, activation_function="gelu_pytorch_tanh" runs it' in message


def test_two_patterns_in_one_function_both_reported():
    gelu = [direct(line(40, GELU_TEXT, GELU_OPS))]
    rms = [direct(dict(ln)) for ln in NAIVE]  # lines 12-14: RMSNorm, far above the GELU
    fused = {f.candidate: f for f in analyze(result(rms + gelu)) if f.kind == "fused_op"}
    assert set(fused) == {"torch.rms_norm", GELU_TANH}
    assert fused["torch.rms_norm"].line == 12 and "lines 12–14" in fused["torch.rms_norm"].message
    assert fused[GELU_TANH].line == 40 and "line 40 of f()" in fused[GELU_TANH].message


def test_layer_norm_claims_its_lines_before_rms_norm():
    lines = [
        direct(line(10, "mu = x.mean(-1, keepdim=True)", [("aten::mean", 1, 10.0)])),
        direct(line(11, "xc = x - mu", [("aten::sub", 1, 10.0)])),
        direct(
            line(
                12, "var = (xc * xc).mean(-1, keepdim=True)", [("aten::mul", 1, 5.0), ("aten::mean", 1, 5.0)]
            )
        ),
        direct(
            line(
                13,
                "return xc * torch.rsqrt(var + eps)",
                [("aten::add", 1, 3.0), ("aten::rsqrt", 1, 3.0), ("aten::mul", 1, 3.0)],
            )
        ),
    ]
    fused = [f for f in analyze(result(lines)) if f.kind == "fused_op"]
    assert [f.candidate for f in fused] == ["torch.nn.functional.layer_norm"]


def test_no_dispatch_hint_on_a_line_that_only_calls_library_code():
    model = direct(line(5, "out = model(x)", [("aten::addmm", 24, 900.0), ("aten::gelu", 12, 100.0)]))
    model.update(via_library=1.0, library_modules=["timm.models.vit"])
    mine = direct(line(6, "return out.softmax(-1) * 2", [("aten::softmax", 1, 50.0), ("aten::mul", 1, 50.0)]))
    found = analyze(result([model, mine]))
    assert [(f.kind, f.line) for f in found] == [("dispatches", 6)]
    model["via_library"] = 0.25  # three of four calls are the line's own: the hint stays
    assert [(f.kind, f.line) for f in analyze(result([model, mine]))] == [
        ("dispatches", 5),
        ("dispatches", 6),
    ]


def test_no_dispatch_hint_on_a_negligible_line():
    # A p=0 dropout in a function that does nothing else: all of a tiny step.
    tiny = [direct(line(7, "x = self.drop(x)", [("aten::dropout", 1, 0.2), ("aten::mul", 1, 0.1)]))]
    assert analyze(result(tiny)) == []
    tiny[0]["ops"][0]["self_time_us"] = 2.0
    tiny[0]["self_time_us"] = tiny[0]["total_time_us"] = 2.1
    assert [f.kind for f in analyze(result(tiny))] == ["dispatches"]


def test_backward_counts_in_a_lines_share():
    # A line cheap forward but heavy in backward is not negligible in a step.
    fwd_cheap = direct(line(8, "y = x * w + b", [("aten::mul", 1, 2.0), ("aten::add", 1, 2.0)]))
    other = direct(line(9, "z = y @ w2", [("aten::mm", 1, 200.0)]))
    assert analyze(result([fwd_cheap, other])) == []  # 2 % forward
    fwd_cheap["backward_self_time_us"] = 40.0
    res = result([fwd_cheap, other])
    res.totals.self_time_us += 40.0
    assert [(f.kind, f.line) for f in analyze(res)] == [("dispatches", 8)]


def test_a_line_whose_second_op_costs_nothing_is_not_told_to_fuse():
    # nanoGPT's ``y = self.resid_dropout(self.c_proj(y))`` with dropout p=0: the
    # linear (and the addmm inside it) is the work; the dropout returns its input.
    ops = [("aten::linear", 4, 8.0), ("aten::addmm", 4, 900.0), ("aten::dropout", 4, 4.0)]
    proj = direct(line(71, "y = self.resid_dropout(self.c_proj(y))", ops, function="attn"))
    proj["ops"][1]["direct_calls"] = 0  # addmm ran inside linear
    proj["hits"] = 4.0
    table = [
        {"name": "aten::linear", "calls": 4, "self_time_us": 8.0, "total_time_us": 908.0, "self_cpu_us": 8.0},
        {
            "name": "aten::addmm",
            "calls": 4,
            "self_time_us": 900.0,
            "total_time_us": 900.0,
            "self_cpu_us": 900.0,
        },
        {"name": "aten::dropout", "calls": 4, "self_time_us": 4.0, "total_time_us": 4.0, "self_cpu_us": 4.0},
    ]
    assert analyze(result([proj], ops=table)) == []
    # a dropout that does work (p > 0: bernoulli and a multiply inside it) counts
    table[2]["total_time_us"] = 200.0
    (f,) = analyze(result([proj], ops=table))
    assert f.kind == "dispatches" and "(linear, dropout, each of its 4 runs per call)" in f.message


def test_a_pattern_never_spans_a_line_of_other_work():
    """A line of other work between the norm's lines (a loss with its matmul) is
    not the norm's: the finding names only the lines whose own ops form it, with
    their figures (66 µs of the norm, not the 400 µs matmul)."""
    ms, r, out = (direct(dict(ln)) for ln in NAIVE)  # lines 12, 13, 14
    other = direct(
        line(13, "loss = lin(x).pow(2).mean()", [("aten::addmm", 1, 400.0), ("aten::mean", 1, 5.0)])
    )
    r["line"], out["line"] = 14, 15
    found = [f for f in analyze(result([ms, other, r, out])) if f.kind == "fused_op"]
    assert len(found) == 1
    assert "lines 12, 14, 15 of f()" in found[0].message and "56 µs" in found[0].message


def test_swiglu_written_out_is_named_without_a_claim():
    ops = [("aten::linear", 3, 300.0), ("aten::silu", 1, 40.0), ("aten::mul", 1, 40.0)]
    found = [
        f
        for f in analyze(
            result([direct(line(20, "return self.down(F.silu(self.gate(x)) * self.up(x))", ops))])
        )
        if f.kind == "fused_op"
    ]
    assert len(found) == 1 and "SwiGLU" in found[0].message and "untested" in found[0].message
    assert found[0].fix is None

"""Fixes as edits (analysis/fixes): built from the AST only where they can be
written safely, applied exactly, refused once the file changed. The RMSNorm is
transformers' LlamaRMSNorm as it ships (transformers 5.x), not code written here."""

from __future__ import annotations

import ast

import pytest

from trainium_lens.analysis.fixes.optimizer import optimizer_edit
from trainium_lens.analysis.fixes.rmsnorm import rms_norm_edit
from trainium_lens.analysis.fixes.source import apply, holds

LLAMA = """import torch
from torch import nn


class LlamaRMSNorm(nn.Module):
    def __init__(self, hidden_size, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)
"""
NORM_LINES = [14, 15, 16]  # the lines the run records mean/pow, add/rsqrt/mul and mul on


def test_llama_rms_norm_becomes_one_rms_norm_call_keeping_its_casts():
    edit = rms_norm_edit(LLAMA, "m.py", NORM_LINES, "step")
    assert edit is not None and (edit.start_line, edit.end_line) == (14, 16)
    assert edit.replacement == (
        "return self.weight * torch.nn.functional.rms_norm(hidden_states, (hidden_states.shape[-1],), "
        "None, self.variance_epsilon).to(input_dtype)"
    )
    after = apply(LLAMA, edit)
    ast.parse(after)  # still Python
    assert "hidden_states = hidden_states.to(torch.float32)" in after  # the cast line stays
    assert "rsqrt" not in after and after.count("\n") == LLAMA.count("\n") - 2


def test_the_same_math_rewritten_computes_the_same():
    torch = pytest.importorskip("torch")
    edit = rms_norm_edit(LLAMA, "m.py", NORM_LINES, "step")
    assert edit is not None
    spaces: list[dict] = [{}, {}]
    exec(compile(LLAMA, "before", "exec"), spaces[0])
    exec(compile(apply(LLAMA, edit), "after", "exec"), spaces[1])
    torch.manual_seed(0)
    x = torch.randn(3, 7, 64, dtype=torch.bfloat16)
    a, b = (ns["LlamaRMSNorm"](64).to(torch.bfloat16) for ns in spaces)
    with torch.no_grad():
        a.weight.uniform_()
        b.weight.copy_(a.weight)
    assert torch.allclose(a(x).float(), b(x).float(), atol=1e-2, rtol=1.6e-2)


def test_the_bundled_example_form_passes_weight_and_eps():
    src = (
        "import torch\n\n\ndef f(x, weight, eps):\n    x2 = x * x\n    mean = x2.mean(-1, keepdim=True)\n"
        "    rstd = torch.rsqrt(mean + eps)\n    return x * rstd * weight\n"
    )
    edit = rms_norm_edit(src, "e.py", [5, 6, 7, 8], "f")
    assert (
        edit is not None
        and edit.replacement == "return torch.nn.functional.rms_norm(x, (x.shape[-1],), weight, eps)"
    )


@pytest.mark.parametrize(
    "change",
    [
        ("mean(-1, keepdim=True)", "mean(0, keepdim=True)"),  # another dimension
        ("mean(-1, keepdim=True)", "mean(-1)"),  # not kept: broadcasting differs
        ("hidden_states.pow(2)", "hidden_states.pow(3)"),  # not a square
        ("import torch\n", "import torch as T\ntorch = T\n"),  # no plain `import torch` to name
        (
            "        hidden_states = hidden_states *",
            "        self.log(variance)\n        hidden_states = hidden_states *",
        ),  # a call inside
    ],
)
def test_no_edit_where_it_cannot_be_written_safely(change):
    src = LLAMA.replace(*change)
    lines = [n + (1 if "self.log" in change[1] and n > 14 else 0) for n in NORM_LINES]
    assert rms_norm_edit(src, "m.py", lines, "step") is None


def test_no_edit_when_the_recorded_lines_are_outside_the_statements():
    assert rms_norm_edit(LLAMA, "m.py", [9, 14, 15, 16], "step") is None


def test_optimizer_keyword_added_beside_the_last_argument_keeping_layout():
    src = "import torch\nopt = torch.optim.AdamW(\n    model.parameters(),\n    lr=1e-3,  # tuned\n)\n"
    edit = optimizer_edit(src, "t.py", "AdamW", "fused=True", "step")
    assert edit is not None and edit.title == "AdamW(..., fused=True)"
    assert apply(src, edit) == src.replace("lr=1e-3,", "lr=1e-3, fused=True,")


def test_optimizer_foreach_replaced_by_what_measured_fastest():
    src = "opt = AdamW(params, foreach=True, lr=3)\n"
    edit = optimizer_edit(src, "t.py", "AdamW", "fused=True", "step")
    assert edit is not None and apply(src, edit) == "opt = AdamW(params, fused=True, lr=3)\n"


@pytest.mark.parametrize(
    "src",
    [
        "a = AdamW(p)\nb = AdamW(q)\n",  # two: which one ran is not known
        "a = AdamW(p, **kw)\n",  # a keyword could be given twice
        "a = SGD(p)\n",  # not the class that stepped
    ],
)
def test_optimizer_no_edit_when_unsafe(src):
    assert optimizer_edit(src, "t.py", "AdamW", "fused=True", "step") is None


def test_an_edit_no_longer_holds_once_its_range_changed():
    edit = rms_norm_edit(LLAMA, "m.py", NORM_LINES, "step")
    assert edit is not None and holds(LLAMA, edit)
    assert not holds(LLAMA.replace("variance + self", "variance+self"), edit)
    assert not holds("\n" + LLAMA, edit)  # a line added above moves the range


def test_columns_count_characters_not_bytes():
    src = (
        "import torch\n\n\ndef f(x, w):\n    é = 1; v = x.pow(2).mean(-1, keepdim=True)\n"
        "    return w * x * torch.rsqrt(v + 1e-6)\n"
    )
    edit = rms_norm_edit(src, "u.py", [5, 6], "f")
    assert edit is not None and edit.start_col == len("    é = 1; ")  # ast says 12 (bytes)
    assert apply(src, edit).splitlines()[4] == (
        "    é = 1; return torch.nn.functional.rms_norm(x, (x.shape[-1],), w, 1e-06)"  # ast.unparse spells it
    )

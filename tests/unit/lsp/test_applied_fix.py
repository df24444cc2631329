"""The hint a fix leaves on the line it wrote (lsp/features/fixes.py): its measured
figures, found again on its line after the lines around it moved."""

from __future__ import annotations

from typing import Any

from tests.support.lsp_client import make_result
from trainium_lens.engine.fixes import Measured
from trainium_lens.lsp.features.fixes import applied_fix
from trainium_lens.model.result import Edit


def _measured(**kw: Any) -> Measured:
    base: dict[str, Any] = dict(
        n=1, file="m.py", line=14, edit_line=14, title="torch.rms_norm", backend="cpu", speedup=3.1,
        before_us=16.4, after_us=5.3, basis="best unprofiled wall", outputs_equal=True,
        max_abs_diff=2e-7, held=True, text="3.1× faster",
    )  # fmt: skip
    base.update(kw)
    return Measured(**base)


def test_the_label_carries_the_measurement_and_the_line_is_found_where_it_moved():
    result = make_result("m.py", "f", 10, {14: ("y = x * x", 10.0, [])})
    before = "".join(f"line {n}\n" for n in range(1, 14)) + "    y = x * x\n    y = y + 1\n    return y\n"
    edit = Edit(
        file="m.py", start_line=14, start_col=4, end_line=16, end_col=12,
        replacement="return torch.rms_norm(x, (512,), w, 1e-6)",
        original="y = x * x\n    y = y + 1\n    return y",
        title="torch.rms_norm", function="f",
    )  # fmt: skip
    fix = applied_fix(result, edit, _measured(), before)
    assert fix.text == "return torch.rms_norm(x, (512,), w, 1e-6)"
    assert fix.label == "⏱ 5.3 µs · fix 3.1× faster (was 16.4 µs)"  # within VS Code's 43 characters
    assert fix.tooltip == "torch.rms_norm, measured before applying: 3.1× faster"
    assert (fix.run_id, fix.file, fix.function) == (result.run_id, "m.py", "f")
    doc = ["def f(x):"] * 20
    doc[13] = doc[2] = "    return torch.rms_norm(x, (512,), w, 1e-6)"
    assert fix.line_in(doc) == 13  # the nearest to where it went
    assert fix.line_in(["", *doc]) == 14  # a line typed above moves it
    assert fix.line_in(["x"]) is None
    assert applied_fix(result, edit, _measured(speedup=None), before).label == "⏱ fix applied"


def test_a_keyword_added_inside_a_call_is_found_on_the_whole_line():
    result = make_result("m.py", "f", 1, {})
    before = "def make():\n    opt = AdamW(params, lr=1e-3)\n"
    edit = Edit(
        file="m.py", start_line=2, start_col=24, end_line=2, end_col=31, replacement="lr=1e-3, fused=True",
        original="lr=1e-3", title="AdamW(..., fused=True)", function="f",
    )  # fmt: skip
    fix = applied_fix(result, edit, _measured(), before)
    assert fix.text == "opt = AdamW(params, lr=1e-3, fused=True)"
    assert fix.line_in(["def make():", "    opt = AdamW(params, lr=1e-3, fused=True)"]) == 1

"""The hover's HLO section for an xla line: forward instructions, then the
backward ones with the autograd node that caused each, capped; stored names
escaped (a result file is data)."""

from __future__ import annotations

from trainium_lens.lsp.present.hover_hlo import MAX_ROWS, hlo_section
from trainium_lens.lsp.present.markdown import code, escape
from trainium_lens.model.lines import BackwardOp, HloRef, LineStat


def test_forward_then_backward_with_nodes_and_the_rest_counted():
    refs = [HloRef("dot.1", opcode="dot", op_type="aten__mm", self_time_us=10.0, calls=1, line=5)]
    refs += [HloRef("fusion.9", opcode="fusion", self_time_us=3.0, calls=1, credited=False, line=7)]
    refs += [
        HloRef(f"dot.{i}", opcode="dot", self_time_us=1.0, calls=1, line=5, phase="backward")
        for i in range(10, 10 + MAX_ROWS + 2)
    ]
    stat = LineStat("m.py", 5, 10.0, 10.0, 10.0, 1.0, instructions=refs)
    stat.backward_ops = [BackwardOp("dot.10", 1, 1.0, node="MmBackward0")]
    text = hlo_section(stat, " xla-cpu") or ""
    forward, backward = text.split("**backward**")
    assert "| `dot.1` | dot · aten\\_\\_mm | 1 | 10 µs xla-cpu |" in forward
    assert "covers this line; 3 µs on line 7" in forward
    assert "| `dot.10` | dot · MmBackward0 | 1 | 1 µs xla-cpu |" in backward
    assert "| … 2 more | | | 2 µs xla-cpu |" in backward
    assert "dot.19" not in backward


def test_stored_strings_cannot_inject_markdown():
    # escape/code themselves: tests/unit/lsp/test_markdown.py; here, that the section uses them
    assert escape("a|b*c_") == "a\\|b\\*c\\_"
    assert code("a`b") == "``a`b``" and code("x|y", in_table=True) == "`x\\|y`"
    ref = HloRef("[go](command:x)", opcode="fusion|1", op_type="<b>", self_time_us=1.0, calls=1, line=5)
    text = hlo_section(LineStat("m.py", 5, 1.0, 1.0, 1.0, 1.0, instructions=[ref]), "") or ""
    assert "fusion\\|1 · \\<b\\>" in text and "`[go](command:x)`" in text

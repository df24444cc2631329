"""A line's per-step figure is the mean of its own spread: time walked outside every
step (step -1: ops between ProfilerSteps, a script's data wait) is in the figure, so
each step takes an even share of it (a line once read a mean above its own max)."""

from __future__ import annotations

from trainium_lens.harness.attribution.figures import lines_and_ops
from trainium_lens.harness.attribution.kinds import FWD
from trainium_lens.harness.attribution.tallies import Attribution, LineOpFigures, OpFigures


class _Source:
    def line(self, file: str, line: int) -> str:
        return "x = f(x)"


def _att() -> Attribution:
    att = Attribution(steps=2)
    # two steps of 1 and 2 µs, and 6 µs between the steps, all on line 3
    for step, value in ((0, 1.0), (1, 2.0), (-1, 6.0)):
        att.line_self[(step, "k", FWD)] += value
        att.line_total[(step, "k", FWD)] += value
        att.line_cpu[(step, "k", FWD)] += value
        att.phase_time[(step, FWD)] += value
    att.line_calls["k"] = 2
    lo = LineOpFigures(0)
    lo.calls, lo.self_time, lo.cpu, lo.direct = 3, 9.0, 9.0, 3
    att.line_ops[("k", "aten::mul", FWD, None)] = lo
    op = OpFigures()
    op.calls, op.self_time, op.total_time, op.cpu = 3, 9.0, 9.0, 9.0
    att.ops["aten::mul"] = op
    return att


def test_a_lines_mean_lies_in_its_spread_when_time_fell_between_the_steps():
    figures = lines_and_ops(_att(), {"k": ("f.py", 3, "f")}, _Source())
    (line,) = figures["lines"]
    assert line["self_time_us"] == 4.5  # (1 + 2 + 6) / 2 steps
    assert line["self_time_us_min"] <= line["self_time_us"] <= line["self_time_us_max"]
    assert (line["self_time_us_min"], line["self_time_us_max"]) == (4.0, 5.0)  # each step + 3 µs
    assert sum(line["step_us"]) / 2 == line["self_time_us"]  # the gate's samples: the same mean
    per_step = figures["per_step"]
    assert min(per_step) <= figures["self_time_us"] <= max(per_step)

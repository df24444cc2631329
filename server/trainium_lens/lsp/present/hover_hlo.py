"""The hover's HLO section (backend xla): the compiled instructions behind a line.

Forward first: a fusion credited to this line shows its time; a fusion that
only *covers* this line (its time went to another line, by the rule in
harness/xla/credit.py) says where its time went, so a line with no time of its
own is not a mystery. Then the backward instructions the line's forward ops
caused, with the autograd node that computed each. The top ``MAX_ROWS`` of each
(the rest counted); on Trn1 device time the line's time per NeuronCore engine
follows the tables. Stored strings go through ``present.markdown``.
"""

from __future__ import annotations

from trainium_lens.lsp.present.markdown import code, escape
from trainium_lens.model import figures
from trainium_lens.model.lines import HloRef, LineStat

MAX_ROWS = 8


def hlo_section(stat: LineStat, clock: str) -> str | None:
    if not stat.instructions:
        return None
    forward = [r for r in stat.instructions if r.phase != "backward"]
    backward = [r for r in stat.instructions if r.phase == "backward"]
    parts = []
    if forward:
        parts.append(_table(None if not backward else "**forward**", forward, clock, {}))
    if backward:
        nodes = {op.name: op.node for op in stat.backward_ops}
        parts.append(
            _table("**backward** (the autograd node of this line that caused it)", backward, clock, nodes)
        )
    if stat.engines:  # Neuron device time (Trn1): engines run in parallel, each a union
        parts.append(
            "Per engine (union of this line's instructions on each): "
            + " · ".join(f"{escape(e.engine)} {figures.time_us(e.time_us)}" for e in stat.engines)
        )
    return "\n\n".join(parts)


def _table(title: str | None, refs: list[HloRef], clock: str, nodes: dict[str, str]) -> str:
    rows = [title] if title else []
    rows += ["| HLO instruction | op | calls | time |", "| --- | --- | ---: | ---: |"]
    for ref in refs[:MAX_ROWS]:
        what = f"{escape(ref.opcode)} · {escape(ref.op_type)}" if ref.op_type else escape(ref.opcode)
        if nodes.get(ref.name):
            what += f" · {escape(nodes[ref.name])}"
        if ref.credited:
            time = f"{figures.time_us(ref.self_time_us)}{clock}"
        else:
            time = f"covers this line; {figures.time_us(ref.self_time_us)} on line {ref.line}"
        rows.append(f"| {code(ref.name, in_table=True)} | {what} | {figures.count(ref.calls)} | {time} |")
    more = len(refs) - MAX_ROWS
    if more > 0:
        rest = sum(r.self_time_us for r in refs[MAX_ROWS:] if r.credited)
        rows.append(f"| … {more} more | | | {figures.time_us(rest)}{clock} |")
    return "\n".join(rows)

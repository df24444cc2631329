"""The hover's HLO section (backend xla): the compiled instructions behind a line.

A fusion credited to this line shows its time; a fusion that only *covers* this
line (its time went to another line, by the rule in harness/xla/attribution.py)
says where its time went, so a line with no time of its own is not a mystery.
On Trn1 device time the line's time per NeuronCore engine follows the table.
"""

from __future__ import annotations

from trainium_lens.lsp.present import format as fmt
from trainium_lens.lsp.present.markdown import code, escape
from trainium_lens.model.result import LineStat

MAX_ROWS = 8


def hlo_section(stat: LineStat, clock: str) -> str | None:
    if not stat.instructions:
        return None
    rows = ["| HLO instruction | op | calls | time |", "| --- | --- | ---: | ---: |"]
    for ref in stat.instructions[:MAX_ROWS]:
        what = escape(f"{ref.opcode} · {ref.op_type}" if ref.op_type else ref.opcode)
        if ref.credited:
            time = f"{fmt.time_us(ref.self_time_us)}{clock}"
        else:
            time = f"covers this line; {fmt.time_us(ref.self_time_us)} on line {ref.line}"
        rows.append(f"| {code(ref.name, in_table=True)} | {what} | {fmt.count(ref.calls)} | {time} |")
    more = len(stat.instructions) - MAX_ROWS
    if more > 0:
        rows.append(f"| … {more} more | | | |")
    if stat.engines:  # Neuron device time (Trn1): engines run in parallel, each a union
        rows += [
            "",
            "Per engine (union of this line's instructions on each): "
            + " · ".join(f"{escape(e.engine)} {fmt.time_us(e.time_us)}" for e in stat.engines),
        ]
    return "\n".join(rows)

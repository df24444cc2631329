"""torch-xla's own execution log as a cross-check of the steps found.

With ``PT_XLA_DEBUG_LEVEL=2`` torch-xla writes an "Execution Analysis" block for
every graph it executes: its cause (``user torch_xla.sync``, ``torch_xla.sync in
parallel loader at step end``, ``torch_xla.compile``, a tensor read before a
sync) and its graph hash. ``PT_XLA_DEBUG_FILE`` sends the blocks to a file
instead of the terminal, one write per execution, flushed before the sync that
caused it returns (checked on torch-xla 2.9, CPU: docs/xla.md). The log of a
training run repeats one pattern of graphs per step (NxD's shape: two
micro-batch graphs and the optimizer's, ``[a, b, c, a, b, c, …]`` after a first
step whose optimizer graph differs): the smallest period of its steady part is
the step torch-xla saw, checked against the graphs of each step the detector
found.

The log is the tool's only where the script left it alone: a script (or its
shell) that sets ``PT_XLA_DEBUG_LEVEL``, ``PT_XLA_DEBUG`` or ``PT_XLA_DEBUG_FILE``
keeps its log as it asked for it, and the cross-check falls back to the graphs
counted per step by torch-xla's metrics (no hashes: the count per step only).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from typing import Any

LEVEL, FILE, OLD = "PT_XLA_DEBUG_LEVEL", "PT_XLA_DEBUG_FILE", "PT_XLA_DEBUG"
OURS = "TRAINIUM_LENS_XLA_DEBUG_FILE"  # the file we set: a child (a torchrun worker) re-arms its own
FINDER = "xla-log"  # the detector's name when the log's pattern finds the steps
TURNS = 3  # turns of a pattern seen before it is taken as the step
GIVE_UP = 64  # executions read without a pattern (or a detector's step): the finder stops

_BLOCK = re.compile(
    r"Execution Analysis: Execution Cause\n((?:Execution Analysis: .*\n)*?)Execution Analysis: -{10}"
)
_CAUSE = re.compile(r"Execution Analysis:   (.+)")
_HASH = re.compile(r"Graph Hash: ([0-9a-f]+)")


def arm(run_dir: str, environ: Any = os.environ) -> str | None:
    """Before torch_xla loads: the log to a file of this process (None: the user's
    own settings stand). Its path, with the pid: under torchrun each rank writes its own."""
    ours = environ.get(OURS)
    if ours is None and any(k in environ for k in (LEVEL, FILE, OLD)):
        return None
    if ours is not None and environ.get(FILE) != ours:  # the user changed it since
        return None
    path = os.path.join(os.path.abspath(run_dir), f"xla-executions-{os.getpid()}.log")
    environ[LEVEL] = "2"
    environ[FILE] = environ[OURS] = path
    return path


def retire(path: str) -> None:
    """The tool is done with the log: torch-xla opens the file for each block, so a link to
    ``/dev/null`` in its place ends its growth (a long job writes about 1 KB a graph) and
    keeps the blocks off the user's terminal. The blocks written so far are dropped."""
    link = f"{path}.retired"
    try:
        os.symlink(os.devnull, link)
        os.replace(link, path)
    except OSError:
        try:
            os.remove(link)
        except OSError:
            pass


def offset(path: str | None) -> int:
    """How far the log is written (a step boundary's mark; 0 when none)."""
    if path is None:
        return 0
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def executions(path: str, start: int = 0, end: int | None = None) -> list[tuple[str, str]]:
    """(cause, graph hash) of each execution logged between two offsets."""
    with open(path, "rb") as f:
        f.seek(start)
        text = f.read(None if end is None else max(0, end - start)).decode("utf-8", "replace")
    out = []
    for block in _BLOCK.finditer(text):
        body = block.group(1)
        cause = _CAUSE.match(body)
        graph = _HASH.search(body)
        out.append((cause.group(1).strip() if cause else "", graph.group(1) if graph else ""))
    return out


def period(hashes: Sequence[str]) -> int | None:
    """The smallest p with ``hashes[i] == hashes[i + p]`` throughout (at least two
    repeats seen); None when the sequence does not repeat."""
    n = len(hashes)
    for p in range(1, n // 2 + 1):
        if all(hashes[i] == hashes[i + p] for i in range(n - p)):
            return p
    return None


def cross_check(steps: Sequence[Sequence[tuple[str, str]]], steady: Sequence[tuple[str, str]]) -> dict:
    """``steps``: each measured step's executions; ``steady``: the log from the
    window's first step to the script's end (the reference steps after it too).
    The result's ``script.xla_log``: the repeating pattern and whether each step
    found holds exactly one turn of it."""
    hashes = [h for _c, h in steady]
    p = period(hashes)
    found = [len(s) for s in steps]
    doc: dict[str, Any] = {"source": f"{LEVEL}=2", "graphs_per_step": found, "period": p}
    if p is None:
        doc["agrees"] = False
        return doc
    doc["pattern"] = [{"hash": h[:12], "cause": c} for c, h in steady[:p]]
    # one turn each, starting where the first step starts (the pattern is read from there)
    turn = hashes[:p]
    doc["agrees"] = all([h for _c, h in s] == turn for s in steps)
    return doc


class StepFinder:
    """The step of a script with neither optimizer nor module forward (a functional loop,
    ``xm.mark_step()`` after each batch): once the log's last ``TURNS`` turns of some pattern
    repeat, a step ends at every sync that completes a turn from there. The log is read after
    each of the script's syncs until the pattern is known (about 1 KB a graph), the graphs
    counted by torch-xla's metrics from then on."""

    def __init__(self, path: str, executed: Callable[[], int]):
        """``executed``: graphs torch-xla has executed so far (its metrics: once the pattern
        is known, counting is enough, and costs no read of the log)."""
        self.path = path
        self.executed = executed
        self.at = offset(path)
        self.hashes: list[str] = []
        self.period: int | None = None
        self.counted = 0  # ``executed()`` where the last turn ended

    def turn_ended(self) -> bool:
        if self.period is not None:
            n = self.executed()
            if n - self.counted >= self.period:
                self.counted += self.period
                return True
            return False
        end = offset(self.path)
        try:
            new = [h for _c, h in executions(self.path, self.at, end)]
        except OSError:
            new = []
        self.at = end
        self.hashes.extend(new)
        for p in range(1, len(self.hashes) // TURNS + 1) if new else ():
            if period(self.hashes[-TURNS * p :]) == p:
                self.period = p
                self.counted = self.executed()
                return True  # the third turn ends here
        return False

    def gave_up(self) -> bool:
        return self.period is None and len(self.hashes) >= GIVE_UP


def counted(graphs: Sequence[int], why: str) -> dict:
    """The fallback: graphs counted per step by torch-xla's metrics."""
    return {
        "source": "metrics",
        "why": why,
        "graphs_per_step": list(graphs),
        "agrees": len(set(graphs)) == 1 and bool(graphs) and graphs[0] > 0,
    }


def disagreement(check: dict) -> str | None:
    """One line for the run's warnings when the steps found are not torch-xla's."""
    if check.get("agrees"):
        return None
    found = check.get("graphs_per_step")
    if check.get("source") == "metrics":
        return f"the steps found ran different numbers of graphs ({found}): a step may not be one update"
    if check.get("period") is None:
        return "torch-xla's execution log shows no repeating pattern of graphs: the steps are not checked"
    return (
        f"torch-xla's execution log repeats every {check['period']} graphs, but the steps found ran "
        f"{found}: a step found may not be one turn of the script's loop"
    )

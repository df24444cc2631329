"""Watch torch.compile: which graphs were compiled when, and which user lines
each graph covers (from the FX nodes' ``meta['stack_trace']``).

Two hooks, both observational (they change nothing dynamo decides):
* ``torch._dynamo.callback`` start callbacks count every frame compile
  (``compile_id`` "i/j": frame i, j-th compile of it, so j > 0 is a recompile);
* a wrapper around ``OutputGraph.call_user_compiler`` reads the graph handed to
  the backend, keyed by the same compile id the profiler prints in
  "Torch-Compiled Region: i/j".
Both are internal APIs: if a torch version lacks them, covered lines are
simply missing (and a warning says so), profiling still works.
"""

from __future__ import annotations

import re
import sys
from typing import Any

from trainium_lens.harness.job.loader import UserCode

_FRAME_RE = re.compile(r'File "([^"]+)", line (\d+)')
_COMPILE_ID_RE = re.compile(r"Torch-Compiled Region: ([^\s()]+)")


def stack_lines(stack_trace: str, user: UserCode) -> list[tuple[str, int]]:
    """User (file, line) pairs in an FX ``stack_trace``, outermost first."""
    out = []
    for filename, line in _FRAME_RE.findall(stack_trace or ""):
        rel = user.relpath(filename)
        if rel is not None:
            out.append((rel, int(line)))
    return out


class CompileWatch:
    def __init__(self, user: UserCode):
        self.user = user
        self.installed = False
        self.compiles: list[str] = []  # compile ids in order
        self.graphs: dict[str, dict] = {}  # compile id -> {"lines": [...], "nodes": n}
        self.problem: str | None = None

    def install(self) -> None:
        """Install once torch._dynamo is loaded (importing it costs seconds)."""
        if self.installed or "torch._dynamo" not in sys.modules:
            return
        self.installed = True
        try:
            from torch._dynamo.callback import callback_handler

            callback_handler.register_start_callback(self._on_start)
        except Exception as exc:
            self.problem = f"cannot count compiles on this torch ({exc})"
        try:
            from torch._dynamo.output_graph import OutputGraph

            original = OutputGraph.call_user_compiler
            watch = self

            def call_user_compiler(self, gm, example_inputs):
                watch._on_graph(str(getattr(self, "dynamo_compile_id", "")), gm)
                return original(self, gm, example_inputs)

            OutputGraph.call_user_compiler = call_user_compiler
        except Exception as exc:
            self.problem = f"cannot read compiled graphs on this torch ({exc})"

    def _on_start(self, args: Any) -> None:
        self.compiles.append(str(getattr(args, "compile_id", "")))

    def _on_graph(self, compile_id: str, gm: Any) -> None:
        try:
            lines: dict[tuple[str, int], None] = {}
            nodes = 0
            for node in gm.graph.nodes:
                if node.op in ("call_function", "call_method", "call_module"):
                    nodes += 1
                    for pair in stack_lines(node.meta.get("stack_trace") or "", self.user):
                        lines[pair] = None
            self.graphs[compile_id] = {"lines": sorted(lines), "nodes": nodes}
        except Exception:  # observing must never break the user's compile
            pass

    def counters(self) -> dict:
        """A snapshot: compiles so far, graph breaks so far."""
        breaks = 0
        if "torch._dynamo" in sys.modules:
            try:
                from torch._dynamo.utils import counters

                breaks = sum(counters["graph_break"].values())
            except Exception:
                pass
        return {"compiles": len(self.compiles), "graph_breaks": breaks}

    def recompiles(self, since: int = 0) -> int:
        """Compiles of a frame compiled before ("i/j", j > 0), from index ``since`` on."""
        return sum(1 for c in self.compiles[since:] if re.fullmatch(r"\d+/[1-9]\d*", c))

    def covered(self, region_name: str) -> dict | None:
        """``Torch-Compiled Region: 0/0`` → the graph compiled as 0/0. The compiled
        backward (``CompiledFunctionBackward (Torch-Compiled Region: 0/0)``, named so
        by the attribution after the forward region that made its node) lists the
        forward graph's lines: AOTAutograd derives the backward from those nodes."""
        found = _COMPILE_ID_RE.search(region_name)
        return self.graphs.get(found.group(1)) if found else None

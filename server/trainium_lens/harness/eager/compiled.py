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

Dynamo is imported by the first ``torch.compile`` (seconds of CPU), and the watch
does not import it: where the user's code compiles lazily (``torch.compile``
called inside the marked function, on its first call), the hooks go in the moment
dynamo's import completes, before that first compile, through a one-shot finder
on ``sys.meta_path``. Installed only after the first call, that compile's graph
and its covered lines were missed (a region with no covered lines).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import re
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
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
        """Install once torch._dynamo is loaded (importing it costs seconds); until
        then, install the moment whatever imports it has (module docstring)."""
        if self.installed:
            return
        if "torch._dynamo" not in sys.modules:
            _after_import("torch._dynamo", self.install)
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


class _AfterImport(importlib.abc.MetaPathFinder):
    """Calls each of ``thens`` once ``name``'s module has executed, whoever imports it
    (one finder per name, however many watches wait on it). The path finder finds the
    module (torch's packages are files), and the loader of that spec has its
    ``exec_module`` wrapped for that one import; once the module has run, this finder
    leaves ``sys.meta_path``."""

    def __init__(self, name: str):
        self.name = name
        self.thens: list[Callable[[], None]] = []

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.name:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        loader = spec.loader if spec is not None else None
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        exec_module = loader.exec_module

        def exec_then(module: ModuleType) -> None:
            try:
                exec_module(module)
            finally:
                vars(loader).pop("exec_module", None)  # this one import only
            # gone once the module has run, not when a spec was only looked up
            # (importlib.util.find_spec hands back a spec that nothing executes)
            if self in sys.meta_path:
                sys.meta_path.remove(self)
            for then in self.thens:
                try:
                    then()
                except Exception:  # observing must never break the user's import
                    pass

        loader.exec_module = exec_then  # type: ignore[method-assign]
        return spec


def _after_import(name: str, then: Callable[[], None]) -> None:
    finder = next((f for f in sys.meta_path if isinstance(f, _AfterImport) and f.name == name), None)
    if finder is None:
        finder = _AfterImport(name)
        sys.meta_path.insert(0, finder)
    if then not in finder.thens:
        finder.thens.append(then)

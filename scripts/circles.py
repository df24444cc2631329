"""No import circles: in the Python package (every import, TYPE_CHECKING ones too:
a circle of types is still a circle a reader has to untangle) and in the
extension's TypeScript. Prints each circle as a chain and exits 1; silent when
there is none. Run by scripts/check.sh ("circles")."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    counter = [0]
    sys.setrecursionlimit(max(10_000, 4 * len(graph)))

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def python_graph(server: Path, package: str) -> dict[str, set[str]]:
    import grimp

    sys.path.insert(0, str(server))
    g = grimp.build_graph(package, cache_dir=None)
    return {m: set(g.find_modules_directly_imported_by(m)) for m in g.modules}


IMPORT_TS = re.compile(r"""^\s*(?:import|export)\b[^"']*?from\s+["'](\.{1,2}/[^"']+)["']""", re.M)


def ts_graph(src: Path) -> dict[str, set[str]]:
    files = {p.with_suffix("").relative_to(src).as_posix(): p for p in src.rglob("*.ts")}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        deps = set()
        for target in IMPORT_TS.findall(path.read_text()):
            dep = (path.parent / target).resolve().relative_to(src.resolve()).as_posix()
            if dep in files:
                deps.add(dep)
            elif f"{dep}/index" in files:
                deps.add(f"{dep}/index")
        graph[name] = deps
    return graph


def report(kind: str, found: Iterable[list[str]]) -> int:
    n = 0
    for comp in found:
        n += 1
        print(f"circles: {kind}: " + " ↔ ".join(comp))
    return n


def main() -> int:
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT
    n = report("python", circles(python_graph(root / "server", "trainium_lens")))
    src = root / "extension" / "src"
    if src.is_dir():
        n += report("typescript", circles(ts_graph(src)))
    return 1 if n else 0


if __name__ == "__main__":
    sys.exit(main())

"""No product module imports another module's private name: a `_name` is free to
change with its own file, so a second file that needs it needs it public. Reads the
package's source (AST, nothing is imported) and reports, with file and line:

- `from trainium_lens.x import _name` (module level or inside a function; relative
  imports resolved), and `import trainium_lens.x._mod`;
- `mod._name` where `mod` is bound by an import of a trainium_lens module
  (`from trainium_lens.x import mod`, `import trainium_lens.x.mod as mod`,
  `import trainium_lens.x` then `trainium_lens.x._name`).

Dunders (`__version__`) are public; privates of other packages (`torch._C`, the
standard library's) are theirs to keep. Prints each finding and exits 1; silent
when there is none. Run by scripts/check.sh ("privates")."""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

PACKAGE = "trainium_lens"
# (importing module, the private name as `module.name`): each names its reason. None now.
ALLOWED: set[tuple[str, str]] = set()


def private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def module_name(server: Path, path: Path) -> tuple[str, bool]:
    """The dotted name of a file under server/, and whether it is a package's __init__."""
    parts = list(path.relative_to(server).with_suffix("").parts)
    init = parts[-1] == "__init__"
    if init:
        parts.pop()
    return ".".join(parts), init


def absolute(module: str, init: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    # a package's __init__ is its package: level 1 is the package itself
    base = base[: len(base) - node.level + (1 if init else 0)]
    return ".".join(base + ([node.module] if node.module else []))


def ours(name: str) -> bool:
    return name == PACKAGE or name.startswith(PACKAGE + ".")


def dotted(node: ast.expr) -> str | None:
    """`a.b.c` as a string, or None for anything but names and attributes."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = dotted(node.value)
        return None if head is None else f"{head}.{node.attr}"
    return None


def findings(server: Path, path: Path) -> Iterator[tuple[int, str, str]]:
    """(line, the private as `module.name`, how it was reached) for one file."""
    module, init = module_name(server, path)
    tree = ast.parse(path.read_text(), str(path))
    bound: dict[str, str] = {}  # a local name -> the trainium_lens module or object it stands for
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            source = absolute(module, init, node)
            if not ours(source):
                continue
            for alias in node.names:
                if private(alias.name) and source != module:
                    yield node.lineno, f"{source}.{alias.name}", "imported"
                bound[alias.asname or alias.name] = f"{source}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if not ours(alias.name):
                    continue
                parts = alias.name.split(".")
                for i, part in enumerate(parts):
                    if private(part):
                        yield node.lineno, ".".join(parts[: i + 1]), "imported"
                        break
                if alias.asname:
                    bound[alias.asname] = alias.name
                else:
                    bound[parts[0]] = parts[0]
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and private(node.attr)):
            continue
        head = dotted(node.value)
        if head is None:
            continue
        first, _, rest = head.partition(".")
        if first not in bound:
            continue
        target = bound[first] + (f".{rest}" if rest else "")
        if target != module:
            yield node.lineno, f"{target}.{node.attr}", "used"


def main(root: Path) -> int:
    server = root / "server"
    found = 0
    for path in sorted((server / PACKAGE).rglob("*.py")):
        module, _ = module_name(server, path)
        seen: set[tuple[int, str]] = set()
        for line, name, how in findings(server, path):
            if (module, name) in ALLOWED or (line, name) in seen:
                continue
            seen.add((line, name))
            print(f"privates: {path.relative_to(root)}:{line}: {how} {name}, private to its module")
            found += 1
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent))

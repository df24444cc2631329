"""The docs keep themselves true: docs/architecture.md's tree names the folders that
exist (and every file it names exists), the docs that comments point to exist, and
nothing cites a document outside the repository or an issue number."""

from __future__ import annotations

import ast
import io
import re
import subprocess
import tokenize
from pathlib import Path

from tests.conftest import ROOT

PACKAGE = ROOT / "server" / "trainium_lens"


def tree_block() -> list[str]:
    text = (ROOT / "docs" / "architecture.md").read_text()
    section = text.split("## Where things live", 1)[1]
    return section.split("```", 2)[1].splitlines()[1:]


def named_paths() -> set[str]:
    """Paths (relative to the repository) the tree names: a line's leading names
    (before the description, two spaces on), nested by indentation."""
    stack: list[str] = []
    out = set()
    for line in tree_block():
        indent = len(line) - len(line.lstrip(" "))
        names = re.split(r"\s{2,}", line.strip(), maxsplit=1)[0].split()
        if not names or not all(n.endswith("/") or re.search(r"\.(py|ts)$", n) for n in names):
            continue  # a description's continuation
        depth = indent // 2
        parent = stack[depth - 1] if depth else ""
        for name in names:
            out.add(parent + name)
            if name.endswith("/"):
                del stack[depth:]
                stack.append(parent + name)
    return out


def test_the_architecture_tree_names_every_package_folder_and_only_what_exists():
    named = named_paths()
    assert "server/trainium_lens/lsp/features/" in named  # the parse found the tree
    missing = sorted(p for p in named if not (ROOT / p).exists())
    assert not missing, f"docs/architecture.md names what does not exist: {missing}"
    folders = {
        p.relative_to(ROOT).as_posix() + "/"
        for p in PACKAGE.rglob("*")
        if p.is_dir() and p.name != "__pycache__" and any(p.glob("*.py"))
    }
    unnamed = sorted(folders - named)
    assert not unnamed, f"docs/architecture.md's tree lacks these folders: {unnamed}"


def tracked(*patterns: str) -> list[str]:
    done = subprocess.run(["git", "ls-files", *patterns], cwd=ROOT, capture_output=True, text=True)
    return [f for f in done.stdout.splitlines() if (ROOT / f).is_file()]


SOURCES = ("*.py", "*.ts", "*.mjs", "*.js", "*.sh", "*.md", "*.toml", "*.json", "*.yaml", "*.css")


def test_comments_cite_documents_in_the_repository_and_no_issue_numbers():
    outside = re.compile(r"shared/notes|\bnotes/\w+\.md|^\s*#\s*notes:", re.M)
    issue = re.compile(r"\bissues? ?#?\d+", re.I)
    found = []
    for name in tracked(*SOURCES):
        if name in ("CHANGELOG.md", "tests/unit/test_docs.py") or name.startswith("tests/data/"):
            continue
        text = (ROOT / name).read_text(errors="replace")
        for pattern in (outside, issue):
            found += [f"{name}: {m.group(0)!r}" for m in pattern.finditer(text)]
    assert not found, "\n".join(found)


def test_the_docs_that_comments_point_to_exist():
    pointed = set()
    for name in tracked("*.py", "*.ts", "*.sh", "*.md", "*.toml"):
        pointed |= set(re.findall(r"\bdocs/[\w-]+\.md\b", (ROOT / name).read_text(errors="replace")))
    assert {"docs/xla.md", "docs/neuron.md", "docs/explorer.md"} <= pointed
    assert not sorted(p for p in pointed if not (ROOT / p).is_file())


# -- module names in comments and docstrings ----------------------------------------------
#: A path (``harness/xla/attribution.py``), a bare module file (``analyze.py``) or a
#: dotted module (``trainium_lens.engine.runner``) a comment or docstring names.
PATH_NAME = re.compile(r"(?<![\w./<>*-])((?:[A-Za-z_][\w-]*/)*[A-Za-z_]\w*\.(?:py|ts|mjs))\b")
DOTTED_NAME = re.compile(r"\btrainium_lens(?:\.\w+)+")
#: Paths that are not this repository's: torch's, torch-xla's, transformers' and accelerate's files,
#: a user's file named as an example (``file.py`` the placeholder of a label), a
#: benchmark's generated workspace, the harness's layout on a host's work dir.
NOT_OURS = (
    *(
        "torch/",
        "torch_xla/",
        "test/test_hlo_metadata.py",
        "transformers/",
        "accelerate/",
        "modeling_llama.py",
        "modeling_gpt2.py",
    ),
    *("train.py", "model.py", "block.py", "file.py", "src/tinygpt/", "lens/"),
    "coverage.py",  # the tool, named in docs/scripts.md
    *("before.py", "after.py"),  # the copies a fix is measured on (engine/fixes.py)
)
TS_TOKEN = re.compile(
    r"""//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'|`(?:\\.|[^`\\])*`""", re.S
)


def python_notes(source: str) -> list[tuple[int, str]]:
    """(line, text) of every comment and docstring of a Python source."""
    notes = [
        (tok.start[0], tok.string)
        for tok in tokenize.generate_tokens(io.StringIO(source).readline)
        if tok.type == tokenize.COMMENT
    ]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = node.body[0] if node.body else None
            if (
                isinstance(doc, ast.Expr)
                and isinstance(doc.value, ast.Constant)
                and isinstance(doc.value.value, str)
            ):
                notes.append((doc.lineno, doc.value.value))
    return notes


def ts_notes(source: str) -> list[tuple[int, str]]:
    """(line, text) of every comment of a TypeScript source (strings skipped, so a
    URL's ``//`` is not a comment)."""
    return [
        (source.count("\n", 0, m.start()) + 1, m.group(0))
        for m in TS_TOKEN.finditer(source)
        if m.group(0).startswith("/")
    ]


def defines(module: Path, name: str) -> bool:
    text = module.read_text()
    return bool(
        re.search(
            rf"^\s*(?:async\s+)?(?:def|class)\s+{name}\b|^\s*{name}\s*[:=]|^\s*(?:from\s+\S+\s+)?import\s.*\b{name}\b",
            text,
            re.M,
        )
    )


def dotted_exists(dotted: str) -> bool:
    """``trainium_lens.a.b`` is a module, or a module and a name it defines."""
    parts = dotted.split(".")
    for n in range(len(parts), 0, -1):
        base = ROOT / "server" / Path(*parts[:n])
        module = base / "__init__.py" if (base / "__init__.py").is_file() else base.with_suffix(".py")
        if module.is_file():
            return n == len(parts) or defines(module, parts[n])
    return False


def folders() -> list[Path]:
    """Where a path in a comment may start: the repository, the server, every
    package folder, every folder of the extension."""
    out = [ROOT, ROOT / "server", PACKAGE]
    out += [p for p in PACKAGE.rglob("*") if p.is_dir() and p.name != "__pycache__"]
    out += [p for p in (ROOT / "extension").rglob("*") if p.is_dir() and "dist" not in p.parts]
    return out


def unknown_names(notes: list[tuple[int, str]], files: set[str], where: list[Path]) -> list[str]:
    """The module names in NOTES that name nothing: a path no folder of WHERE holds,
    a bare file name no tracked file has (FILES: their names), a dotted module that
    is not there."""
    found = []
    for line, text in notes:
        for m in PATH_NAME.finditer(text):
            name = m.group(1)
            if name.startswith(NOT_OURS):
                continue
            known = name in files if "/" not in name else any((d / name).is_file() for d in where)
            if not known:
                found.append(f"{line}: {name}")
        found += [
            f"{line}: {m.group(0)}" for m in DOTTED_NAME.finditer(text) if not dotted_exists(m.group(0))
        ]
    return found


def test_comments_and_docstrings_name_only_modules_that_exist():
    files = {Path(f).name for f in tracked("*")}
    where = folders()
    found = []
    for name in tracked("server/*.py", "extension/src/*.ts"):
        source = (ROOT / name).read_text()
        notes = python_notes(source) if name.endswith(".py") else ts_notes(source)
        found += [f"{name}:{hit}" for hit in unknown_names(notes, files, where)]
    for doc in tracked("*.md"):  # and the docs' prose (the changelog is history)
        if doc != "CHANGELOG.md" and not doc.startswith("tests/data/"):
            found += [
                f"{doc}: {hit[3:]}" for hit in unknown_names([(1, (ROOT / doc).read_text())], files, where)
            ]
    assert not found, "\n".join(found)


def test_the_module_name_check_fails_on_a_name_that_does_not_exist():
    files = {Path(f).name for f in tracked("*")}
    where = folders()
    source = '''"""Reads the trace (harness/xla/xplane.py, trainium_lens.engine.runner.profile)."""

# the old reader: harness/xla_trace.py, then xla_attribution.py
def f():
    """Merged by trainium_lens.engine.ranks.merge_document."""
'''
    found = unknown_names(python_notes(source), files, where)
    assert found == [
        "3: harness/xla_trace.py",
        "3: xla_attribution.py",
        "5: trainium_lens.engine.ranks.merge_document",
    ]
    ts = 'const u = "https://x.invalid/a/b.py"; // see lsp/timeline.py\n/* and lsp/features/timeline.py */\n'
    assert unknown_names(ts_notes(ts), files, where) == ["1: lsp/timeline.py"]
    assert not dotted_exists("trainium_lens.engine.runner.no_such_name")
    assert dotted_exists("trainium_lens.model.ranks.merge_document")


def test_the_docs_relative_links_resolve():
    """A page moved or renamed leaves no dead link behind (README → docs/, docs → docs)."""
    dead = []
    for doc in tracked("*.md"):
        if doc == "CHANGELOG.md" or doc.startswith("tests/data/"):
            continue
        for link in re.findall(r"\]\(([^)\s#]+)(?:#[^)\s]*)?\)", (ROOT / doc).read_text()):
            if (
                not link.startswith(("http:", "https:", "mailto:"))
                and not (ROOT / doc).parent.joinpath(link).exists()
            ):
                dead.append(f"{doc}: {link}")
    assert not dead, "\n".join(dead)

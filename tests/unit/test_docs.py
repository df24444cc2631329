"""The docs keep themselves true: docs/architecture.md's tree names the folders that
exist (and every file it names exists), the docs that comments point to exist, and
nothing cites a document outside the repository or an issue number."""

from __future__ import annotations

import re
import subprocess

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

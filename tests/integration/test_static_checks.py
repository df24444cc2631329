"""scripts/lint.sh (run by scripts/test.sh) fails on a ruff, mypy, tsc, checkJs
or ESLint finding, and passes on clean code: each check really runs, with the
project's configuration. Checked on a small tree beside the real one (the same
config files and tools), clean first, then with one error for each check."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tests.conftest import ROOT

CLEAN = {
    "server/pkg/__init__.py": "",
    "server/pkg/mod.py": "def double(x: int) -> int:\n    return 2 * x\n",
    "tests/__init__.py": "",
    "extension/src/mod.ts": "export function double(x: number): number {\n  return 2 * x;\n}\n",
    "extension/test/mod.test.ts": 'import { double } from "../src/mod";\n\nexport const four = double(2);\n',
    "extension/media/timeline/page.js": "(function () {\n  'use strict';\n"
    "  const M = self.TimelineModel;\n  M.formatUs(3);\n})();\n",
}
# One finding per check; each check must name itself in lint.sh's summary.
BROKEN = {
    "ruff": ("server/pkg/mod.py", "import os\n\n\ndef double(x: int) -> int:\n    return 2 * x\n"),
    # Only check_untyped_defs reports an error inside an unannotated function.
    "mypy": ("server/pkg/untyped.py", 'def f():\n    x: int = "not a number"\n    return x\n'),
    # strict: an implicit any parameter.
    "tsc": ("extension/src/loose.ts", "export function f(a) {\n  return a;\n}\n"),
    # checkJs: a function the timeline model does not have.
    "tsc-media": (
        "extension/media/timeline/page.js",
        "(function () {\n  'use strict';\n  self.TimelineModel.noSuchFunction();\n})();\n",
    ),
    # typescript-eslint's recommended rules: no explicit any.
    "eslint": ("extension/test/any.test.ts", "export const anything: any = 1;\n"),
}


def make_tree(root):
    for name in (
        "pyproject.toml",
        "tsconfig.json",
        "eslint.config.mjs",
        "scripts/lint.sh",
        "extension/media/tsconfig.json",
        "extension/media/timeline/globals.d.ts",
    ):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, root / name)
    for name in (".venv", "node_modules"):  # the tools, as installed for the real tree
        (root / name).symlink_to(ROOT / name)
    for name, text in CLEAN.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def lint(root) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MYPY")}
    return subprocess.run(
        ["bash", "scripts/lint.sh"], cwd=root, capture_output=True, text=True, timeout=600, env=env
    )


@pytest.mark.slow
def test_lint_passes_clean_code_and_fails_on_each_kind_of_error(tmp_path):
    if not (ROOT / "node_modules" / ".bin" / "eslint").exists():
        pytest.fail("run 'npm ci' first: the static checks need tsc and eslint")
    make_tree(tmp_path)
    done = lint(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "lint: ruff, mypy, tsc, tsc-media, eslint clean" in done.stderr

    for name, text in BROKEN.values():
        (tmp_path / name).write_text(text)
    done = lint(tmp_path)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == "lint: failed: ruff mypy tsc tsc-media eslint"
    out = done.stdout + done.stderr
    assert "F401" in out  # ruff: `os` imported but unused
    assert 'Incompatible types in assignment (expression has type "str", variable has type "int")' in out
    assert "Parameter 'a' implicitly has an 'any' type" in out
    assert "Property 'noSuchFunction' does not exist" in out
    assert "@typescript-eslint/no-explicit-any" in out


def test_lint_says_what_to_run_when_the_tools_are_missing(tmp_path):
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "lint.sh", tmp_path / "scripts" / "lint.sh")
    done = lint(tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip() == "lint: run scripts/setup.sh first (no .venv/bin/ruff or mypy)"

"""scripts/check.sh (run by scripts/test.sh) fails on a ruff, ruff format, mypy, tsc,
checkJs, ESLint, prettier, layer, circle or private-name finding, and passes on clean code: each check
really runs, with the project's configuration. Checked on a tree beside the real one
(the same config files and tools, a copy of the real package and small files of
each kind), clean first, then with one error for each check."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT

CLEAN = {
    "server/pkg/__init__.py": "",
    "server/pkg/mod.py": "def double(x: int) -> int:\n    return 2 * x\n",
    "tests/__init__.py": "",
    "extension/src/mod.ts": "export type Double = number;\n\n"
    "export function double(x: number): number {\n  return 2 * x;\n}\n",
    "extension/src/peer.ts": 'import type { Double } from "./mod";\n\nexport type Peer = Double;\n',
    "extension/test/mod.test.ts": 'import { double } from "../src/mod";\n\nexport const four = double(2);\n',
    "extension/media/timeline/page.js": '(function () {\n  "use strict";\n'
    "  const M = self.TimelineModel;\n  M.formatUs(3);\n})();\n",
}
# One finding per check; each check must name itself in check.sh's summary.
BROKEN = {
    "ruff": ("server/pkg/mod.py", "import os\n\n\ndef double(x: int) -> int:\n    return 2 * x\n"),
    # Only the formatter minds single quotes (no lint rule selected does).
    "ruff-format": ("server/pkg/quotes.py", "NAME = 'single'\n"),
    # Only check_untyped_defs reports an error inside an unannotated function.
    "mypy": ("server/pkg/untyped.py", 'def f():\n    x: int = "not a number"\n    return x\n'),
    # strict: an implicit any parameter.
    "tsc": ("extension/src/loose.ts", "export function f(a) {\n  return a;\n}\n"),
    # checkJs: a function the timeline model does not have.
    "tsc-media": (
        "extension/media/timeline/page.js",
        '(function () {\n  "use strict";\n  self.TimelineModel.noSuchFunction();\n})();\n',
    ),
    # A type-aware rule: a promise nobody awaits.
    "eslint": (
        "extension/test/floating.test.ts",
        "async function one(): Promise<number> {\n  return await Promise.resolve(1);\n}\n\n"
        "export function start(): void {\n  one();\n}\n",
    ),
    "prettier": ("extension/test/spaced.test.ts", "export const  spaced = 1;\n"),
    # The harness imports from the core (it would not exist on a target).
    # mod.ts importing the peer that imports it (types only: tsc accepts it).
    "circles": (
        "extension/src/mod.ts",
        'import type { Peer } from "./peer";\n\n'
        "export type Double = number;\nexport type Both = [Double, Peer];\n\n"
        "export function double(x: number): number {\n  return 2 * x;\n}\n",
    ),
    "layers": (
        "server/trainium_lens/harness/leak.py",
        "from trainium_lens.model.result import Result\n\n\ndef result_type() -> type:\n    return Result\n",
    ),
    # A core module reading a name the harness keeps private.
    "privates": (
        "server/trainium_lens/analysis/peek.py",
        "from trainium_lens.harness.markers import _DEFS\n\nDEFS = _DEFS\n",
    ),
}
CONFIG = (
    "pyproject.toml",
    "tsconfig.json",
    "eslint.config.mjs",
    ".prettierrc.json",
    ".prettierignore",
    "scripts/check.sh",
    "extension/media/tsconfig.json",
    "extension/media/timeline/globals.d.ts",
    "tests/support/import_contracts.py",  # the layer check's allow-list contract type
    "scripts/circles.py",
    "scripts/privates.py",
)


def make_tree(root: Path) -> None:
    for name in CONFIG:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, root / name)
    (root / "tests/support/__init__.py").write_text("")
    for name in (".venv", "node_modules"):  # the tools, as installed for the real tree
        (root / name).symlink_to(ROOT / name)
    # The real package: the layer contracts name its modules.
    shutil.copytree(
        ROOT / "server/trainium_lens",
        root / "server/trainium_lens",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    for name, text in CLEAN.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def check(root: Path, *names: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MYPY") and k != "PYTHONPATH"}
    return subprocess.run(
        ["bash", "scripts/check.sh", *names], cwd=root, capture_output=True, text=True, timeout=600, env=env
    )


@pytest.mark.slow
def test_check_passes_clean_code_and_fails_on_each_kind_of_error(tmp_path):
    if not (ROOT / "node_modules" / ".bin" / "eslint").exists():
        pytest.fail("run 'npm ci' first: the static checks need tsc, eslint and prettier")
    make_tree(tmp_path)
    done = check(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (
        "check: ruff ruff-format mypy tsc tsc-media eslint prettier layers circles privates clean"
        in done.stderr
    )

    for name, text in BROKEN.values():
        (tmp_path / name).write_text(text)
    done = check(tmp_path)
    assert done.returncode == 1
    out = done.stdout + done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        "check: failed: ruff ruff-format mypy tsc tsc-media eslint prettier layers circles privates"
    ), out
    assert "circles: typescript: mod ↔ peer" in out
    assert "F401" in out  # ruff: `os` imported but unused
    assert "server/pkg/quotes.py" in out  # ruff format --check names the file
    assert 'Incompatible types in assignment (expression has type "str", variable has type "int")' in out
    assert "Parameter 'a' implicitly has an 'any' type" in out
    assert "Property 'noSuchFunction' does not exist" in out
    assert "@typescript-eslint/no-floating-promises" in out
    assert "extension/test/spaced.test.ts" in out  # prettier --check names the file
    assert "trainium_lens.harness.leak -> trainium_lens.model.result (l.1)" in out
    assert "server/trainium_lens/analysis/peek.py:1: imported trainium_lens.harness.markers._DEFS" in out


# One forbidden import per layer rule: (file, text, the contract that must break, the import it names).
LAYER_BREAKS = [
    (
        "server/trainium_lens/harness/leak.py",
        "import pygls\n\nVERSION = pygls\n",
        "The harness runs alone on a target",
        "trainium_lens.harness.leak -> pygls",
    ),
    (
        "server/trainium_lens/engine/leak.py",
        "from trainium_lens.harness.eager import run\n\nRUN = run\n",
        "The core imports from the harness only its contract modules",
        "trainium_lens.engine.leak -> trainium_lens.harness.eager.run",
    ),
    (
        "server/trainium_lens/model/leak.py",
        "from trainium_lens.engine import runner\n\nRUNNER = runner\n",
        "The core's layers",
        "trainium_lens.model.leak -> trainium_lens.engine.runner",
    ),
    (  # the notebook's in-process entry is the notebook's alone (notebook/run.py)
        "server/trainium_lens/engine/leak.py",
        "from trainium_lens.harness.eager import in_process\n\nRUN = in_process\n",
        "The core imports from the harness only its contract modules",
        "trainium_lens.engine.leak -> trainium_lens.harness.eager.in_process",
    ),
    (  # the notebook is the top layer: nothing below imports it
        "server/trainium_lens/cli/leak.py",
        "from trainium_lens.notebook import run\n\nRUN = run\n",
        "The core's layers",
        "trainium_lens.cli.leak -> trainium_lens.notebook.run",
    ),
    (
        "server/trainium_lens/engine/leak.py",
        "from trainium_lens.targets.ssh.target import SshTarget\n\nTARGET = SshTarget\n",
        "The engine names no concrete target",
        "trainium_lens.engine.leak -> trainium_lens.targets.ssh.target",
    ),
    (  # make.py is not named in the contract, but it imports every concrete target: indirect imports count
        "server/trainium_lens/engine/leak.py",
        "from trainium_lens.targets.make import make_target\n\nMAKE = make_target\n",
        "The engine names no concrete target",
        "trainium_lens.engine.leak -> trainium_lens.targets.make",
    ),
    (
        "server/trainium_lens/analysis/leak.py",
        "import torch\n\nTORCH = torch\n",
        "Nothing outside the harness imports torch",
        "trainium_lens.analysis.leak -> torch",
    ),
    (  # a command borrowing another's helper (they belong in cli/)
        "server/trainium_lens/cli/commands/leak.py",
        "from trainium_lens.cli.commands.show import run\n\nSHOW = run\n",
        "Commands import no command",
        "trainium_lens.cli.commands.leak -> trainium_lens.cli.commands.show",
    ),
    (  # a feature reaching into another (only command ids cross: lsp/command_ids.py)
        "server/trainium_lens/lsp/features/leak.py",
        "from trainium_lens.lsp.features.profile import COMMAND\n\nPROFILE = COMMAND\n",
        "Features import no feature",
        "trainium_lens.lsp.features.leak -> trainium_lens.lsp.features.profile",
    ),
]


@pytest.fixture(scope="module")
def layers_pass_the_clean_tree(tmp_path_factory) -> None:
    """The tree ``make_tree`` builds passes the layer check: asserted once for every
    break below (each lint-imports run over the real package: ~0.6 s of CPU)."""
    root = tmp_path_factory.mktemp("layers-clean")
    make_tree(root)
    done = check(root, "layers")
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("path, text, contract, named", LAYER_BREAKS, ids=lambda v: str(v)[:40])
def test_the_layer_check_fails_on_a_forbidden_import(
    layers_pass_the_clean_tree, tmp_path, path, text, contract, named
):
    make_tree(tmp_path)
    (tmp_path / path).write_text(text)
    done = check(tmp_path, "layers")
    assert done.returncode == 1 and done.stderr.strip().splitlines()[-1] == "check: failed: layers"
    broken = done.stdout.split("Broken contracts", 1)[-1]
    assert contract in broken and named in broken, done.stdout


CIRCLES = [
    (
        # a finding module reaching back into the entry that imports it
        "server/trainium_lens/analysis/findings/ops.py",
        "\n\ndef _entry() -> object:\n"
        "    from trainium_lens.analysis.findings import analyze\n\n    return analyze\n",
        "python: trainium_lens.analysis.findings.analyze ↔ trainium_lens.analysis.findings.ops",
    ),
    (
        "extension/src/a.ts",
        'import { b } from "./b";\n\nexport const a = (): number => b + 1;\n',
        "typescript: a ↔ b",
    ),
]


@pytest.mark.parametrize("path, text, named", CIRCLES, ids=["python", "typescript"])
def test_the_circles_check_fails_on_a_new_import_circle(tmp_path, path, text, named):
    make_tree(tmp_path)
    (tmp_path / "extension/src/b.ts").write_text(
        'import type { a } from "./a";\n\nexport const b = 1;\nexport type A = typeof a;\n'
    )
    assert check(tmp_path, "circles").returncode == 0
    target = tmp_path / path
    target.write_text((target.read_text() if target.exists() else "") + text)
    done = check(tmp_path, "circles")
    assert done.returncode == 1 and done.stderr.strip().splitlines()[-1] == "check: failed: circles"
    assert named in done.stdout, done.stdout


# A small package of its own (the real one's allow-list names modules it does not have):
# `a` keeps `_hidden` private, `b` uses only `a`'s public names, and torch's privates are
# torch's.
PRIVATE_CLEAN = {
    "server/trainium_lens/__init__.py": "",
    "server/trainium_lens/pkg/__init__.py": "",
    "server/trainium_lens/pkg/a.py": "def _hidden() -> int:\n    return 1\n\n\n"
    "def shown() -> int:\n    return _hidden()\n",
    "server/trainium_lens/pkg/b.py": "import torch\n\nfrom trainium_lens.pkg import a\n"
    "from trainium_lens.pkg.a import shown\n\nC = torch._C\nBOTH = (a.shown, shown, a.__name__)\n",
}
# One way each to reach a private of another module: (file, text, the finding).
PRIVATE_BREAKS = [
    (
        "server/trainium_lens/pkg/c.py",
        "from trainium_lens.pkg.a import _hidden\n",
        "server/trainium_lens/pkg/c.py:1: imported trainium_lens.pkg.a._hidden",
    ),
    (
        "server/trainium_lens/pkg/c.py",
        "def late() -> object:\n    from trainium_lens.pkg.a import _hidden\n\n    return _hidden\n",
        "server/trainium_lens/pkg/c.py:2: imported trainium_lens.pkg.a._hidden",
    ),
    (
        "server/trainium_lens/pkg/c.py",
        "from .a import _hidden\n",
        "server/trainium_lens/pkg/c.py:1: imported trainium_lens.pkg.a._hidden",
    ),
    (
        "server/trainium_lens/pkg/c.py",
        "from trainium_lens.pkg import a\n\nHIDDEN = a._hidden\n",
        "server/trainium_lens/pkg/c.py:3: used trainium_lens.pkg.a._hidden",
    ),
    (
        "server/trainium_lens/pkg/c.py",
        "import trainium_lens.pkg.a as alias\n\nHIDDEN = alias._hidden\n",
        "server/trainium_lens/pkg/c.py:3: used trainium_lens.pkg.a._hidden",
    ),
    (
        "server/trainium_lens/pkg/c.py",
        "import trainium_lens.pkg.a\n\nHIDDEN = trainium_lens.pkg.a._hidden\n",
        "server/trainium_lens/pkg/c.py:3: used trainium_lens.pkg.a._hidden",
    ),
]


@pytest.mark.parametrize(
    "path, text, named",
    PRIVATE_BREAKS,
    ids=["from-import", "local-import", "relative", "module-attribute", "alias", "dotted"],
)
def test_the_privates_check_fails_on_a_private_name_of_another_module(tmp_path, path, text, named):
    (tmp_path / "scripts").mkdir()
    for name in ("scripts/check.sh", "scripts/privates.py"):
        shutil.copy(ROOT / name, tmp_path / name)
    for name in (".venv", "node_modules"):
        (tmp_path / name).symlink_to(ROOT / name)
    for name, source in PRIVATE_CLEAN.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(source)
    done = check(tmp_path, "privates")
    assert done.returncode == 0 and done.stdout == "", done.stdout + done.stderr
    (tmp_path / path).write_text(text)
    done = check(tmp_path, "privates")
    assert done.returncode == 1 and done.stderr.strip().splitlines()[-1] == "check: failed: privates"
    assert done.stdout.splitlines() == [f"privates: {named}, private to its module"], done.stdout


def test_check_says_what_to_run_when_the_tools_are_missing(tmp_path):
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "check.sh", tmp_path / "scripts" / "check.sh")
    done = check(tmp_path)
    assert done.returncode == 2
    assert (
        done.stderr.strip() == "check: run scripts/setup.sh first (no .venv/bin/ruff, mypy or lint-imports)"
    )

"""The .vsix is built from a fresh clone, and carries exactly the Python
libraries the lock pins, byte for byte the same in every build of a commit."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tests.conftest import ROOT

LOCK = ROOT / "extension" / "requirements-vsix.txt"


def tree_hashes(folder: Path) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def pins() -> dict[str, str]:
    return dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+) \\$", LOCK.read_text(), re.M))


def vendor(dest: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "scripts/vendor-libs.sh", str(dest)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHON": sys.executable, **env},
    )


def test_the_lock_pins_what_pyproject_asks_for_with_hashes():
    wanted = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    locked = pins()
    for spec in map(Requirement, wanted):
        assert spec.specifier.contains(locked[spec.name], prereleases=True), (spec, locked)
    entries = LOCK.read_text().count("--hash=sha256:")
    assert entries == len(locked) >= 3  # pygls, lsprotocol and what they need, each hashed


@pytest.mark.slow
def test_two_vendorings_are_byte_identical_and_hold_the_pinned_versions(tmp_path):
    first, second = tmp_path / "a" / "libs", tmp_path / "b" / "libs"
    for dest in (first, second):
        done = vendor(dest)
        assert done.returncode == 0, done.stderr
    assert tree_hashes(first) == tree_hashes(second)
    dists = [p.name.removesuffix(".dist-info").rsplit("-", 1) for p in first.glob("*.dist-info")]
    installed = {name.replace("_", "-").lower(): version for name, version in dists}
    assert installed == pins()
    assert not [p for p in first.rglob("*") if p.suffix in (".pyc", ".so")]


def test_a_lock_out_of_step_with_pyproject_is_refused(tmp_path):
    # A copy of the lock that no longer matches pyproject.toml's dependencies.
    stale = tmp_path / "repo"
    shutil.copytree(ROOT / "scripts", stale / "scripts")
    shutil.copy(ROOT / "pyproject.toml", stale / "pyproject.toml")
    (stale / "extension").mkdir()
    (stale / "extension" / "requirements-vsix.txt").write_text(
        LOCK.read_text().replace("#   pygls", "#   pygls-old")
    )
    done = subprocess.run(
        ["bash", "scripts/vendor-libs.sh", str(tmp_path / "libs")],
        cwd=stale,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHON": sys.executable},
    )
    assert done.returncode != 0
    assert "run scripts/lock-vsix-deps.sh" in done.stderr and not (tmp_path / "libs").exists()


def test_without_a_usable_python_packaging_says_what_to_run_in_one_line(tmp_path):
    done = subprocess.run(
        ["bash", "scripts/package-vsix.sh"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHON": str(tmp_path / "no-python")},
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"package-vsix.sh: needs a Python 3.11+ with pip ({tmp_path / 'no-python'} is not one): "
        "run scripts/setup.sh first"
    ]


@pytest.mark.slow
def test_a_fresh_clone_builds_the_vsix_with_the_locked_libraries(tmp_path):
    if subprocess.run(
        ["git", "status", "--porcelain", "--", "scripts", "extension", "package.json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    ).stdout.strip():
        pytest.skip("uncommitted packaging changes: a clone would not have them")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True, timeout=120)
    assert not (clone / ".venv").exists()
    # node_modules is npm's cache of the lockfile's packages; the clone reuses ours.
    (clone / "node_modules").symlink_to(ROOT / "node_modules")
    python = shutil.which("python3") or sys.executable
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHON", "VIRTUAL_ENV")}
    done = subprocess.run(
        ["bash", "scripts/package-vsix.sh"], cwd=clone, capture_output=True, text=True, timeout=600, env=env
    )
    assert done.returncode == 0, done.stderr[-3000:]
    vsix = clone / done.stdout.strip().splitlines()[-1]
    with zipfile.ZipFile(vsix) as z:
        names = z.namelist()
        libs = {
            n[len("extension/extension/dist/libs/") :]: hashlib.sha256(z.read(n)).hexdigest()
            for n in names
            if n.startswith("extension/extension/dist/libs/") and not n.endswith("/")
        }
        license_text = z.read("extension/LICENSE.txt").decode()
    assert "Apache License" in license_text and "Version 2.0, January 2004" in license_text
    assert "extension/changelog.md" in names  # vsce's name for CHANGELOG.md
    assert not [n for n in names if n.endswith((".d.ts", "tsconfig.json", ".lock-sha256"))]
    # Another build (ours, vendored on its own) carries the very same bytes.
    ours = tmp_path / "libs"
    assert vendor(ours).returncode == 0
    assert libs == tree_hashes(ours)
    assert python  # the clone found a Python without scripts/setup.sh

"""The git state a run records: a real git, in a fresh repository."""

from __future__ import annotations

import subprocess
from pathlib import Path

from trainium_lens.engine.provenance import git_state


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(root), "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def test_commit_branch_and_dirty(tmp_path):
    assert git_state(tmp_path, "model.py").commit is None  # not a work tree: unknown, no error
    git(tmp_path, "init", "-q", "-b", "main")
    (tmp_path / "model.py").write_text("x = 1\n")
    assert git_state(tmp_path, "model.py").commit is None  # no commit yet
    git(tmp_path, "add", "model.py")
    git(tmp_path, "commit", "-qm", "one")
    head = git(tmp_path, "rev-parse", "HEAD")
    clean = git_state(tmp_path, "model.py")
    assert (clean.commit, clean.dirty, clean.branch) == (head, False, "main")
    assert clean.short == head[:7]
    (tmp_path / "scratch.txt").write_text("notes")  # untracked elsewhere: still clean
    assert not git_state(tmp_path, "model.py").dirty
    (tmp_path / "new.py").write_text("y = 2\n")  # the profiled file itself untracked: dirty
    assert git_state(tmp_path, "new.py").dirty
    (tmp_path / "model.py").write_text("x = 2\n")  # a tracked change
    dirty = git_state(tmp_path, "model.py")
    assert dirty.dirty and dirty.short == head[:7] + "+dirty"
    git(tmp_path, "checkout", "-q", "--detach")
    assert git_state(tmp_path, "model.py").branch is None

"""Which code a run measured: the workspace's git state when the run began.

Recorded on this machine (the core's side), not by the harness: an SSH host
gets a synced copy of the workspace without ``.git``. Read before the run
starts, so an edit made while it runs does not relabel it. Never fails a run:
no git, no work tree or a slow git (a huge repository, a network file system)
gives ``GitState()`` (commit unknown) and the run goes on.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from trainium_lens.model.result import GitState

GIT_TIMEOUT_S = 5.0


def _git(root: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(root), *args],
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout if out.returncode == 0 else None


def git_state(workspace: Path, file: str | None = None) -> GitState:
    """HEAD's commit and branch, and whether the tree is dirty: a tracked file
    differs from HEAD (staged or not), or ``file`` (the profiled file, relative to
    ``workspace``) is not tracked at all, so the commit does not hold what ran.
    Untracked files elsewhere do not count (scratch files, results)."""
    commit = _git(workspace, "rev-parse", "--verify", "-q", "HEAD")
    if not commit or not commit.strip():
        return GitState()
    status = _git(workspace, "status", "--porcelain", "--untracked-files=no")
    dirty = status is None or bool(status.strip())  # unreadable: claim nothing clean
    if not dirty and file:
        dirty = _git(workspace, "ls-files", "--error-unmatch", "--", file) is None
    branch = _git(workspace, "symbolic-ref", "-q", "--short", "HEAD")
    return GitState(commit=commit.strip(), dirty=dirty, branch=(branch or "").strip() or None)

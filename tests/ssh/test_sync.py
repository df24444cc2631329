"""Syncing a workspace to a host (real sshd on loopback): which files go, both
transports (rsync, tar + manifest), incremental re-sync, the size cap, the
harness bundle uploaded only when it changed, and names that a shell would
misread."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from trainium_lens.errors import TargetError
from trainium_lens.targets.ssh import sync
from trainium_lens.targets.ssh.target import SshTarget

pytestmark = pytest.mark.ssh

HOSTILE = 'dir with space/it\'s "q" $(touch pwned) ünï✓'


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


def _workspace(root: Path, git: bool = True) -> Path:
    (root / "pkg").mkdir(parents=True)
    (root / "main.py").write_text("import helper\n")
    (root / "helper.py").write_text("X = 1\n")
    (root / "pkg" / "mod.py").write_text("Y = 2\n")
    (root / HOSTILE).parent.mkdir(parents=True, exist_ok=True)
    (root / HOSTILE).write_text("hostile\n")
    (root / "big.ckpt").write_bytes(b"x" * 1000)
    (root / ".gitignore").write_text("*.ckpt\n")
    if git:
        _git(root, "init", "-q")
        _git(root, "add", "main.py", ".gitignore")
    return root


def test_file_list_follows_git(tmp_path):
    root = _workspace(tmp_path / "ws")
    files = sync.workspace_files(root).files
    # tracked + untracked-not-ignored; the ignored checkpoint stays home
    assert set(files) == {"main.py", "helper.py", "pkg/mod.py", HOSTILE, ".gitignore"}


def test_file_list_without_git_is_the_folder(tmp_path):
    root = _workspace(tmp_path / "plain", git=False)
    (root / "__pycache__").mkdir()
    (root / "__pycache__" / "x.pyc").write_bytes(b"0")
    files = sync.workspace_files(root).files
    assert "big.ckpt" in files and "pkg/mod.py" in files
    assert not any("__pycache__" in f for f in files)


def test_size_cap_names_the_biggest_files(tmp_path):
    root = _workspace(tmp_path / "ws", git=False)
    with pytest.raises(TargetError) as info:
        sync.workspace_files(root, cap_bytes=500)
    assert "big.ckpt" in str(info.value) and "cap" in str(info.value)


def _remote_tree(src: Path) -> dict[str, str]:
    return {p.relative_to(src).as_posix(): p.read_text() for p in src.rglob("*") if p.is_file()}


@pytest.mark.parametrize("use_rsync", [True, False], ids=["rsync", "tar"])
def test_sync_copies_exactly_the_workspace(sshd, ssh_control_dir, tmp_path, use_rsync):
    root = _workspace(tmp_path / "ws")
    same_second = 1_700_000_000_100_000_000
    os.utime(root / "helper.py", ns=(same_second, same_second))
    work = tmp_path / "remote work"
    target = SshTarget("lens-test", ssh_config=str(sshd.config), work_dir=str(work), use_rsync=use_rsync)
    events: list[dict] = []
    info = target.prepare(root)
    assert info["wd"] == str(work.resolve())
    target.sync(root, info, events.append)
    tree = _remote_tree(work / "src")
    assert tree == {
        "main.py": "import helper\n",
        "helper.py": "X = 1\n",
        "pkg/mod.py": "Y = 2\n",
        HOSTILE: "hostile\n",
        ".gitignore": "*.ckpt\n",
    }
    assert (work / "lens" / "trainium_lens" / "__init__.py").is_file()
    assert (work / "lens" / "ssh_wrapper.py").is_file()
    assert any(e.get("stage") == "sync" for e in events)

    # change one file (same size, saved within the same second: a whole-second
    # mtime check would miss it), delete one: the next sync carries exactly that
    (root / "helper.py").write_text("X = 3\n")
    os.utime(root / "helper.py", ns=(same_second + 400_000_000,) * 2)
    (root / "pkg" / "mod.py").unlink()
    events.clear()
    info = target.prepare(root)
    target.sync(root, info, events.append)
    tree = _remote_tree(work / "src")
    assert tree["helper.py"] == "X = 3\n"
    if not use_rsync:  # the tar manifest also removes deleted files
        assert "pkg/mod.py" not in tree
    # the harness was already there with the same hash: not installed again
    assert not any("harness" in e.get("message", "") for e in events)
    assert not list(tmp_path.rglob("pwned")) and not (sshd.home / "pwned").exists()


def test_default_work_dir_is_under_the_remote_home(sshd, ssh_control_dir, tmp_path):
    root = _workspace(tmp_path / "ws")
    info = SshTarget("lens-test", ssh_config=str(sshd.config)).prepare(root)
    assert info["wd"].startswith(str(sshd.home) + "/.cache/trainium-lens/ws-")


def test_remote_python_missing_is_one_clear_line(sshd, ssh_control_dir, tmp_path):
    target = SshTarget(
        "lens-test",
        ssh_config=str(sshd.config),
        work_dir=str(tmp_path / "w"),
        remote_python="/nonexistent/py thon",
    )
    with pytest.raises(TargetError) as info:
        target.prepare(tmp_path)
    assert str(info.value) == ("lens-test: the remote Python /nonexistent/py thon does not exist on the host")


def test_harness_bundle_hash_tracks_content():
    digest, data = sync.harness_bundle()
    again, _ = sync.harness_bundle()
    assert digest == again and len(data) > 0

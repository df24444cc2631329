"""``--json``, ``--junit``, ``-o`` (``cli/outputs.write_output``) in a folder a
repository committed: a link at the temporary name or at the target carries no
write out of it."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from trainium_lens.cli.outputs import OutputError, write_output
from trainium_lens.model import files


@pytest.fixture
def outside(tmp_path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "kept").write_text("kept\n")
    return folder


def test_a_committed_temporary_link_is_not_followed(tmp_path, outside):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / ".diff.json.tmp").symlink_to(outside / "created")
    (ws / ".kept.json.tmp").symlink_to(outside / "kept")
    write_output(ws / "diff.json", '{"a": 1}', "--json")
    write_output(ws / "kept.json", '{"b": 2}', "--json")
    assert not (outside / "created").exists() and (outside / "kept").read_text() == "kept\n"
    assert (ws / "diff.json").read_text() == '{"a": 1}' and (ws / "kept.json").read_text() == '{"b": 2}'
    assert (ws / ".diff.json.tmp").is_symlink()  # left as it was, not renamed over the output


def test_a_linked_read_only_or_hard_linked_output_is_refused_with_one_line(tmp_path, outside):
    (tmp_path / "link.json").symlink_to(outside / "kept")
    (tmp_path / "ro.json").write_text("ro")
    (tmp_path / "ro.json").chmod(0o444)
    (tmp_path / "hard.json").write_text("hard")
    os.link(tmp_path / "hard.json", tmp_path / "hard2.json")
    for name in ("link.json", "ro.json", "hard.json"):
        with pytest.raises(OutputError) as err:
            write_output(tmp_path / name, "{}", "--json")
        assert str(err.value).startswith(f"--json {tmp_path / name} ") and "\n" not in str(err.value)
        assert err.value.exit_code == 2
    assert (outside / "kept").read_text() == "kept\n" and (tmp_path / "link.json").is_symlink()
    assert (tmp_path / "ro.json").read_text() == "ro" and (tmp_path / "hard2.json").read_text() == "hard"


def test_a_failed_write_leaves_no_temporary(tmp_path, monkeypatch):
    (tmp_path / "out.json").write_text("old")

    def full(fd, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(files.os, "write", full)
    with pytest.raises(OutputError) as err:
        write_output(tmp_path / "out.json", "{}", "--json")
    assert "No space left" in str(err.value)
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"] and (
        tmp_path / "out.json"
    ).read_text() == "old"


def test_a_new_file_gets_the_umask_mode_and_a_fifo_is_written_through(tmp_path):
    old = os.umask(0o027)
    try:
        write_output(tmp_path / "sub" / "new.json", "{}")
    finally:
        os.umask(old)
    assert (tmp_path / "sub" / "new.json").stat().st_mode & 0o777 == 0o640
    os.mkfifo(tmp_path / "pipe")
    reader = os.open(tmp_path / "pipe", os.O_RDONLY | os.O_NONBLOCK)
    try:
        write_output(tmp_path / "pipe", "{}")
        assert os.read(reader, 10) == b"{}"
    finally:
        os.close(reader)


def test_dev_stdout_redirected_to_a_file_is_written_through(tmp_path):
    """``--json /dev/stdout > out.json``: the link leads to a regular file the shell
    opened; the user named the descriptor, so it is written, not refused or replaced."""
    import subprocess
    import sys

    code = "from trainium_lens.cli.outputs import write_output; write_output('/dev/stdout', '{}', '--json')"
    with open(tmp_path / "out.json", "w") as out:
        done = subprocess.run([sys.executable, "-c", code], stdout=out, stderr=subprocess.PIPE, text=True)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out.json").read_text() == "{}"

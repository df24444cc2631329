"""The one writer (``model/files.py``): what a folder a repository committed can
hold must not carry a write anywhere else, and the target keeps what it was."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from trainium_lens.model import files
from trainium_lens.model.files import WriteError, check_target, python_encoding, source_bytes, write_file


@pytest.fixture
def outside(tmp_path) -> Path:
    victim = tmp_path / "outside" / "authorized_keys"
    victim.parent.mkdir()
    victim.write_text("ssh-ed25519 KEY\n")
    victim.chmod(0o600)
    return victim


@pytest.fixture
def ws(tmp_path) -> Path:
    folder = tmp_path / "ws"
    folder.mkdir()
    return folder


def test_a_committed_link_at_any_temporary_name_is_never_followed(ws, outside, monkeypatch):
    # the names the old writers used, and the one this writer would draw next
    monkeypatch.setattr(files.secrets, "token_hex", lambda n: "abcabcabcabc")
    for name in (".out.json.tmp", ".out.json.trainium-lens-fix.tmp", ".out.json.abcabcabcabc.tmp"):
        (ws / name).symlink_to(outside)
    with pytest.raises(FileExistsError):  # O_EXCL|O_NOFOLLOW: the drawn name is taken, never opened
        write_file(ws / "out.json", b"{}")
    monkeypatch.undo()
    write_file(ws / "out.json", b"{}")
    assert (ws / "out.json").read_bytes() == b"{}"
    assert outside.read_text() == "ssh-ed25519 KEY\n" and outside.stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in ws.iterdir() if not p.is_symlink()) == ["out.json"]


def test_a_linked_folder_read_only_or_hard_linked_target_is_refused_with_one_line(ws, outside):
    (ws / "link.py").symlink_to(outside)
    (ws / "ro.py").write_text("a = 1\n")
    (ws / "ro.py").chmod(0o444)
    (ws / "hard.py").write_text("b = 2\n")
    os.link(ws / "hard.py", ws / "other-name.py")
    (ws / "dir").mkdir()
    for name, words in (
        ("link.py", "symbolic link"),
        ("ro.py", "read-only"),
        ("hard.py", "hard links"),
        ("dir", "folder"),
    ):
        with pytest.raises(WriteError) as err:
            write_file(ws / name, b"x = 0\n", name)
        assert words in str(err.value) and "\n" not in str(err.value)
        with pytest.raises(WriteError):
            check_target(ws / name, name)
    assert outside.read_text() == "ssh-ed25519 KEY\n"
    assert (ws / "ro.py").read_text() == "a = 1\n" and (ws / "other-name.py").read_text() == "b = 2\n"
    with pytest.raises(WriteError):  # force never follows a link
        write_file(ws / "link.py", b"x = 0\n", force=True)


def test_force_replaces_a_read_only_or_hard_linked_file_keeping_its_mode(ws):
    (ws / "ro.py").write_text("a = 1\n")
    (ws / "ro.py").chmod(0o444)
    (ws / "hard.py").write_text("b = 2\n")
    os.link(ws / "hard.py", ws / "other-name.py")
    write_file(ws / "ro.py", b"a = 2\n", force=True)
    write_file(ws / "hard.py", b"b = 3\n", force=True)
    assert (ws / "ro.py").read_text() == "a = 2\n" and (ws / "ro.py").stat().st_mode & 0o777 == 0o444
    assert (ws / "hard.py").read_text() == "b = 3\n" and (ws / "other-name.py").read_text() == "b = 2\n"


def test_mode_and_owner_are_kept(ws):
    target = ws / "m.py"
    target.write_text("old\n")
    target.chmod(0o751)
    if os.geteuid() == 0:
        os.chown(target, 12345, 23456)
    write_file(target, b"new\n")
    st = target.stat()
    assert target.read_text() == "new\n" and st.st_mode & 0o7777 == 0o751
    if os.geteuid() == 0:
        assert (st.st_uid, st.st_gid) == (12345, 23456)


def test_a_failed_write_leaves_no_temporary_and_the_target_as_it_was(ws, monkeypatch):
    target = ws / "m.py"
    target.write_text("old\n")

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(files.os, "fsync", full)
    with pytest.raises(OSError):
        write_file(target, b"new\n")
    assert target.read_text() == "old\n"
    assert [p.name for p in ws.iterdir()] == ["m.py"]


def test_the_store_replaces_a_committed_link_without_following_it(ws, outside):
    (ws / "r.json").symlink_to(outside)
    write_file(ws / "r.json", b"{}", own=True)
    assert not (ws / "r.json").is_symlink() and (ws / "r.json").read_bytes() == b"{}"
    assert outside.read_text() == "ssh-ed25519 KEY\n"


def test_a_stream_is_written_straight_through(ws):
    fifo = ws / "pipe"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        write_file(fifo, b"{}\n", streams=True)
        assert os.read(reader, 100) == b"{}\n"
    finally:
        os.close(reader)
    with pytest.raises(WriteError):  # not where a stream is not asked for
        write_file(fifo, b"{}\n")


def test_source_bytes_keep_the_declared_encoding_and_the_bom(ws):
    latin = ws / "latin.py"
    latin.write_bytes('# -*- coding: latin-1 -*-\nname = "café"\n'.encode("latin-1"))
    assert python_encoding(latin.read_bytes()) == "iso-8859-1"
    assert source_bytes('# -*- coding: latin-1 -*-\nname = "cafés"\n', latin, "latin.py") == (
        '# -*- coding: latin-1 -*-\nname = "cafés"\n'.encode("latin-1")
    )
    bom = ws / "bom.py"
    bom.write_bytes(b"\xef\xbb\xbfa = 1\n")
    assert source_bytes("a = 2\n", bom, "bom.py") == b"\xef\xbb\xbfa = 2\n"
    with pytest.raises(WriteError) as err:
        source_bytes('name = "\u20ac"\n', latin, "latin.py")
    assert "iso-8859-1" in str(err.value) and "\n" not in str(err.value)

"""``fix --apply``'s write (``cli/commands/fix.write_held``) in a repository that
may have committed anything beside the file: no link is followed, the file keeps
its encoding, BOM and mode, and what cannot be written is one line."""

from __future__ import annotations

import errno
import os

import pytest

from trainium_lens.cli.commands.fix import write_held
from trainium_lens.engine.fixes import Measured
from trainium_lens.errors import LensError, UsageError
from trainium_lens.model import files
from trainium_lens.model.result import Edit

SRC = "def f():\n    a = 1\n    b = 2\n"


def _held() -> Measured:
    return Measured(
        n=1, file="m.py", line=2, edit_line=2, title="t", backend="cpu", speedup=2.0, before_us=2.0,
        after_us=1.0, basis="best unprofiled wall", outputs_equal=True, max_abs_diff=0.0, held=True, text="",
    )  # fmt: skip


def _edit(line: int, old: str, new: str, file: str = "m.py") -> Edit:
    return Edit(file, line, 4, line, 4 + len(old), new, old, "t", "f")


def test_a_committed_temporary_link_is_not_followed(tmp_path):
    ws, outside = tmp_path / "ws", tmp_path / "authorized_keys"
    ws.mkdir()
    outside.write_text("ssh-ed25519 KEY\n")
    outside.chmod(0o600)
    (ws / "m.py").write_text(SRC)
    (ws / ".m.py.trainium-lens-fix.tmp").symlink_to(outside)
    m = _held()
    write_held(ws, [(m, _edit(2, "a = 1", "a = 10"))])
    assert m.applied and (ws / "m.py").read_text() == SRC.replace("a = 1", "a = 10")
    assert outside.read_text() == "ssh-ed25519 KEY\n" and outside.stat().st_mode & 0o777 == 0o600
    assert (ws / ".m.py.trainium-lens-fix.tmp").is_symlink() and not (ws / "m.py").is_symlink()


@pytest.mark.parametrize("kind", ["link", "read-only", "hard link"])
def test_a_linked_read_only_or_hard_linked_file_is_refused_unless_forced(tmp_path, kind):
    ws = tmp_path / "ws"
    ws.mkdir()
    real = ws / "m.py"
    real.write_text(SRC)
    name = "m.py"
    if kind == "link":
        (ws / "l.py").symlink_to(real)
        name = "l.py"
    elif kind == "read-only":
        real.chmod(0o444)
    else:
        os.link(real, tmp_path / "other-name.py")
    m = _held()
    with pytest.raises(UsageError) as err:
        write_held(ws, [(m, _edit(2, "a = 1", "a = 10", name))])
    assert "\n" not in str(err.value) and not m.applied
    assert real.read_text() == SRC
    if kind == "link":
        with pytest.raises(UsageError):
            write_held(ws, [(m, _edit(2, "a = 1", "a = 10", name))], force=True)
        return
    write_held(ws, [(m, _edit(2, "a = 1", "a = 10", name))], force=True)
    assert m.applied and real.read_text() == SRC.replace("a = 1", "a = 10")
    if kind == "read-only":
        assert real.stat().st_mode & 0o777 == 0o444
    else:
        assert (tmp_path / "other-name.py").read_text() == SRC  # its other name keeps the old text


def test_the_file_keeps_its_encoding_and_bom(tmp_path):
    latin = '# -*- coding: latin-1 -*-\ndef f():\n    a = "café"\n'
    (tmp_path / "m.py").write_bytes(latin.encode("latin-1"))
    write_held(tmp_path, [(_held(), _edit(3, 'a = "café"', 'a = "cafés"'))])
    assert (tmp_path / "m.py").read_bytes() == latin.replace("café", "cafés").encode("latin-1")
    (tmp_path / "b.py").write_bytes(b"\xef\xbb\xbf" + SRC.encode())
    write_held(tmp_path, [(_held(), _edit(2, "a = 1", "a = 10", "b.py"))])
    assert (tmp_path / "b.py").read_bytes() == b"\xef\xbb\xbf" + SRC.replace("a = 1", "a = 10").encode()


def test_a_file_that_cannot_be_written_is_one_line_and_left_as_it_was(tmp_path, monkeypatch):
    (tmp_path / "m.py").write_text(SRC)

    def refuse(src, dst):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(files.os, "replace", refuse)
    m = _held()
    with pytest.raises(LensError) as err:
        write_held(tmp_path, [(m, _edit(2, "a = 1", "a = 10"))])
    assert err.value.exit_code in (2, 4) and "Read-only file system" in str(err.value)
    assert "\n" not in str(err.value) and not m.applied
    assert [p.name for p in tmp_path.iterdir()] == ["m.py"] and (tmp_path / "m.py").read_text() == SRC

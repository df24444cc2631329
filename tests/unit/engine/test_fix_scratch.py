"""``fix``'s measurement (``engine/fixes.py``) with a stored result a repository
may have committed: the file an edit names is read only when it is a regular file
inside the workspace, the scratch copies are never made through a link, keep the
file's encoding, and are removed whatever happens."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.unit.model.test_untrusted_results import result as stored_result
from trainium_lens.engine.fixes import SCRATCH, current_text, measure, scratch_folder
from trainium_lens.errors import LensError, UsageError
from trainium_lens.model.result import Edit

LATIN = """# -*- coding: latin-1 -*-
import torch


# trainium: profile
def f():
    a = "café"
    return a
"""


def _edit(file: str = "m.py") -> Edit:
    return Edit(file, 7, 4, 7, 14, 'a = "cafés"', 'a = "café"', "t", "f")


@pytest.fixture
def ws(tmp_path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "m.py").write_bytes(LATIN.encode("latin-1"))
    return root


@pytest.mark.parametrize("name", ["/dev/zero", "/dev/stdin", "fifo.py", "zero.py", "../m.py", "dir"])
def test_an_edit_naming_anything_but_a_regular_file_inside_the_workspace_is_refused_unread(ws, name):
    os.mkfifo(ws / "fifo.py")  # opening it would block
    (ws / "zero.py").symlink_to("/dev/zero")  # reading it would never end
    (ws / "dir").mkdir()
    with pytest.raises(UsageError) as err:
        current_text(ws, _edit(name))
    assert "\n" not in str(err.value)


def test_a_committed_scratch_link_is_refused_and_nothing_is_made_through_it(ws, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (ws / ".trainium-lens").mkdir()
    (ws / SCRATCH).symlink_to(outside)
    with pytest.raises(UsageError):
        scratch_folder(ws)
    (ws / SCRATCH).unlink()
    (ws / ".trainium-lens").rmdir()
    (ws / ".trainium-lens").symlink_to(outside)
    with pytest.raises(UsageError):
        scratch_folder(ws)
    assert list(outside.iterdir()) == []


@pytest.mark.parametrize("failure", [LensError("the run failed"), KeyboardInterrupt()])
def test_the_copies_keep_the_encoding_and_are_removed_on_failure(ws, failure):
    result = stored_result()
    result.function.file, result.function.name = "m.py", "f"
    seen: dict[str, bytes] = {}

    def profile(job, *rest):
        (folder,) = (ws / SCRATCH).iterdir()
        seen.update({p.name: p.read_bytes() for p in folder.iterdir()})
        raise failure

    try:
        measured = measure(result, _edit(), 1, 7, ws, target=None, profile=profile)  # type: ignore[arg-type]
        assert measured.held is False and "the run failed" in measured.text
    except KeyboardInterrupt:
        pass
    assert seen["before.py"] == LATIN.encode("latin-1")
    assert seen["after.py"] == LATIN.replace("café", "cafés").encode("latin-1")
    assert list((ws / SCRATCH).iterdir()) == []
    assert (ws / "m.py").read_bytes() == LATIN.encode("latin-1")


def test_copies_a_killed_fix_left_are_removed_by_the_next(ws, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("keep")
    scratch = ws / SCRATCH
    scratch.mkdir(parents=True)
    dead = scratch / "999999999-0123456789ab"  # no such process
    dead.mkdir()
    (dead / "before.py").write_text("x = 1\n")
    (scratch / "999999998-link").symlink_to(outside)
    mine = scratch / f"{os.getpid()}-0123456789ab"  # a fix still running (this process)
    mine.mkdir()
    other = scratch / "notes"
    other.mkdir()
    folder = scratch_folder(ws)
    assert sorted(p.name for p in scratch.iterdir()) == sorted([folder.name, mine.name, "notes"])
    assert (outside / "keep").read_text() == "keep"

"""The Chrome trace's export on a full disk: whether torch's own write or the
tagging's rewrite fails, nothing is left in the run folder (no half trace, no
temporary file) and the failure reaches the caller, who warns and goes on."""

from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from trainium_lens.harness.attribution.trace_tags import export_tagged


class HalfWriter:
    """A profiler whose export writes part of the trace, then meets a full disk."""

    def export_chrome_trace(self, path: str) -> None:
        with open(path, "w", encoding="utf-8") as out:
            out.write('{"traceEvents": [')
        raise OSError(errno.ENOSPC, "No space left on device", path)


def test_a_full_disk_in_torchs_export_leaves_no_half_trace(tmp_path: Path) -> None:
    path = tmp_path / "r.trace.json"
    att = SimpleNamespace(event_lines={1: (("f.py", 3), 0)})
    with pytest.raises(OSError):
        export_tagged(HalfWriter(), str(path), att, {})
    assert sorted(os.listdir(tmp_path)) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="mounts a small tmpfs: needs root")
def test_a_full_disk_while_tagging_leaves_no_trace_nor_temporary(tmp_path: Path) -> None:
    """A real full disk: the trace fits, its tagged rewrite (beside it, then
    renamed over it) does not."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], check=True)
    try:
        path = mnt / "r.trace.json"
        events = [
            {"ph": "X", "cat": "cpu_op", "name": "aten::mul", "args": {"External id": i}} for i in range(400)
        ]

        class Fits:
            def export_chrome_trace(self, where: str) -> None:
                Path(where).write_text(__import__("json").dumps({"traceEvents": events}))

        att = SimpleNamespace(event_lines={i: ("k", 0) for i in range(400)})
        labels = {"k": ("a_long_file_name_for_the_tags_to_outgrow_the_disk.py", 3)}
        with pytest.raises(OSError) as raised:
            export_tagged(Fits(), str(path), att, labels)
        assert raised.value.errno == errno.ENOSPC
        assert sorted(os.listdir(mnt)) == []
    finally:
        subprocess.run(["umount", str(mnt)], check=True)

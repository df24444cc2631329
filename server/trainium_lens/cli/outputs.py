"""Files the command line writes where the user says (``--json``, ``--junit``,
``-o``), through the one writer (``model/files.py``): a regular file is replaced
atomically through a random temporary that never follows a link (a reader never
sees half of it, a failed write leaves no temporary file), a character device or
FIFO (``/dev/stdout``, ``>(jq .)``, a named pipe) is written straight through
(never replaced by a file), and a symbolic link, a folder, a read-only or
hard-linked file is refused; every failure is one line (``OutputError``, exit 2),
and nothing there is lost.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from trainium_lens.errors import UsageError
from trainium_lens.model.files import WriteError, write_file


class OutputError(UsageError):
    """An output file could not be written (exit 2: the path given is the problem)."""


def write_output(path: str | os.PathLike, text: str, option: str = "the output") -> Path:
    target = Path(path)
    try:
        return write_file(target, text.encode("utf-8"), option, streams=True, parents=True)
    except WriteError as err:
        raise OutputError(str(err)) from None
    except OSError as exc:
        raise OutputError(f"cannot write {option} {target}: {exc.strerror or exc}") from None


def write_json(path: str, data: Any) -> None:
    """``--json PATH``: ``data`` as indented JSON, written as every output is."""
    write_output(path, json.dumps(data, indent=1), "--json")

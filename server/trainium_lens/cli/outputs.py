"""Files the command line writes where the user says (``--json``, ``--junit``,
``-o``): a regular file is replaced atomically (a reader never sees half of it,
a failed write leaves no temporary file), a character device or FIFO
(``/dev/stdout``, ``>(jq .)``, a named pipe) is written straight through (never
replaced by a file), anything else that exists there (a folder) is refused;
every failure is one line (``OutputError``, exit 2), and nothing there is lost.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from trainium_lens.errors import UsageError


class OutputError(UsageError):
    """An output file could not be written (exit 2: the path given is the problem)."""


def write_output(path: str | os.PathLike, text: str, option: str = "the output") -> Path:
    target = Path(path)
    try:
        mode = target.stat().st_mode  # links followed: /dev/stdout, /dev/fd/63
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise OutputError(f"{option} {target}: {exc.strerror or exc}") from None
    try:
        if mode is not None and (stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)):
            with open(target, "w", encoding="utf-8") as handle:  # straight through, as a shell would
                handle.write(text)
            return target
        if mode is not None and not stat.S_ISREG(mode):
            kind = "a folder" if stat.S_ISDIR(mode) else "not a regular file"
            raise OutputError(f"{option} {target} is {kind}: not written (name a file)")
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.tmp")
        try:
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, target)
        except BaseException:
            tmp.unlink(missing_ok=True)  # a full disk leaves no temporary file
            raise
    except OSError as exc:
        raise OutputError(f"cannot write {option} {target}: {exc.strerror or exc}") from None
    return target


def write_json(path: str, data: Any) -> None:
    """``--json PATH``: ``data`` as indented JSON, written as every output is."""
    write_output(path, json.dumps(data, indent=1), "--json")

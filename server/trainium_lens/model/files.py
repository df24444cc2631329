"""The one writer for every file the tool replaces: the user's source (``fix
--apply``), the files the command line writes where the user says (``--json``,
``--junit``, ``-o``) and the store's own results.

A folder the tool writes into may hold what a repository committed, so nothing
there is trusted: the temporary file has a random name and is created with
``O_CREAT|O_EXCL|O_NOFOLLOW`` (a committed ``.model.py.tmp -> ~/.ssh/authorized_keys``
is never opened), mode 0o600 until the text is in; then it gets the target's mode
(and owner, where this process may set it), is flushed to disk (``fsync``) and
renamed over the target (``os.replace``: a reader sees the old file or the new
one, never half). Any failure removes the temporary file and leaves the target
as it was.

The target itself is checked before anything is written (docs/security.md): a
symbolic link, anything but a regular file, a read-only file or one with other
names (hard links, which a replace would split) is refused with one line
(``WriteError``), unless the caller says otherwise: ``force`` replaces a
read-only or hard-linked file, ``streams`` writes a character device or a FIFO
(``/dev/stdout``, ``>(jq .)``) straight through, ``own`` (the store, inside the
tool's own folder) replaces whatever name is there without following it.
"""

from __future__ import annotations

import os
import secrets
import stat
import tokenize
from pathlib import Path

from trainium_lens.errors import UsageError

_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


class WriteError(UsageError):
    """A file the tool was asked to write is refused or could not be written (one line)."""


def python_encoding(data: bytes) -> str:
    """The encoding Python reads a source in (PEP 263 cookie or UTF-8 BOM, else UTF-8):
    ``utf-8-sig`` for a BOM, so encoding with it writes the BOM back."""
    lines = iter(data.splitlines(keepends=True)[:2])
    encoding, _ = tokenize.detect_encoding(lambda: next(lines, b""))
    return encoding


def decode_source(data: bytes) -> str:
    """A Python file's bytes as Python reads them (its declared encoding, a BOM dropped)."""
    return data.decode(python_encoding(data))


def source_bytes(text: str, like: Path, what: str) -> bytes:
    """``text`` in the encoding (and BOM) of the Python file ``like`` as it is now: an
    edit never re-encodes the file. ``WriteError`` when the text cannot be written in it."""
    try:
        with open(like, "rb") as fh:
            head = fh.readline() + fh.readline()
        encoding = python_encoding(head)
    except (OSError, SyntaxError):
        encoding = "utf-8"
    try:
        return text.encode(encoding)
    except UnicodeEncodeError as exc:
        char = exc.object[exc.start : exc.end]
        raise WriteError(f"{what}: {char!r} cannot be written in the file's encoding ({encoding})") from None


def umask() -> int:
    """This process's umask, read without setting it (other threads may be creating files)."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    old = os.umask(0o022)
    os.umask(old)
    return old


def _refusal(path: Path, st: os.stat_result, force: bool, what: str) -> str | None:
    """Why ``path`` (as ``lstat`` saw it) must not be replaced, or None."""
    if stat.S_ISLNK(st.st_mode):
        return f"{what} {path} is a symbolic link: not written (name the file it points to)"
    if stat.S_ISDIR(st.st_mode):
        return f"{what} {path} is a folder: not written (name a file)"
    if not stat.S_ISREG(st.st_mode):
        return f"{what} {path} is not a regular file: not written"
    if force:
        return None
    if not st.st_mode & 0o222 or (os.geteuid() != 0 and not os.access(path, os.W_OK, follow_symlinks=False)):
        return f"{what} {path} is read-only: not written (--force replaces it)"
    if st.st_nlink > 1:
        return (
            f"{what} {path} has {st.st_nlink - 1} other name(s) (hard links): not written "
            f"(--force replaces it, its other names keep the old text)"
        )
    return None


def check_target(path: Path, what: str, *, force: bool = False) -> None:
    """``WriteError`` now if ``write_file`` would refuse ``path`` (said before the work
    that leads to the write); a missing file is not refused."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    why = _refusal(path, st, force, what)
    if why:
        raise WriteError(why)


#: A process's own descriptors by name (``/dev/stdout``, ``/dev/fd/3``, ``/proc/self/fd/1``):
#: whatever they lead to (a file the shell redirected to), the user named that descriptor.
_DESCRIPTORS = ("/dev/stdout", "/dev/stderr", "/dev/fd/", "/proc/self/fd/")


def _stream(path: Path, data: bytes, what: str) -> bool:
    """Write a character device, a FIFO or one of this process's descriptors straight
    through (as a shell would); False when ``path`` is none (links followed:
    ``/dev/stdout`` is a link)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return False
    descriptor = str(path).startswith(_DESCRIPTORS) and stat.S_ISREG(mode)
    if not (stat.S_ISCHR(mode) or stat.S_ISFIFO(mode) or descriptor):
        return False
    flags = os.O_WRONLY | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0) | (os.O_TRUNC if descriptor else 0)
    fd = os.open(path, flags)
    try:
        mode = os.fstat(fd).st_mode
        if not (stat.S_ISCHR(mode) or stat.S_ISFIFO(mode) or descriptor):  # swapped since it was looked at
            raise WriteError(f"{what} {path} changed while it was opened: not written")
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)
    return True


def write_file(
    path: str | os.PathLike,
    data: bytes,
    what: str = "the file",
    *,
    force: bool = False,
    streams: bool = False,
    own: bool = False,
    parents: bool = False,
) -> Path:
    """Replace (or create) ``path`` with ``data`` as the module says. ``WriteError`` for a
    refused target; ``OSError`` when the write itself fails (the target is then as it was)."""
    target = Path(path)
    if streams and _stream(target, data, what):
        return target
    try:
        st: os.stat_result | None = os.lstat(target)
    except FileNotFoundError:
        st = None
    if st is not None and not own:
        why = _refusal(target, st, force, what)
        if why:
            raise WriteError(why)
    if parents:
        target.parent.mkdir(parents=True, exist_ok=True)
    keep = st is not None and stat.S_ISREG(st.st_mode)
    mode = stat.S_IMODE(st.st_mode) if keep and st is not None else 0o666 & ~umask()
    tmp = target.with_name(f".{target.name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, _CREATE, 0o600)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if keep and st is not None and (st.st_uid, st.st_gid) != (os.geteuid(), os.getegid()):
                try:
                    os.fchown(fd, st.st_uid, st.st_gid)
                except PermissionError:
                    pass  # not ours to give away: the mode is still kept
            os.fchmod(fd, mode)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _sync_folder(target.parent)
    return target


def _sync_folder(folder: Path) -> None:
    """The rename itself survives a crash once the folder is flushed (best effort)."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)

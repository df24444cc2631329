"""Copy a workspace (and the harness) to a host's work dir, incrementally.

Which files: in a git work tree, what git would commit (tracked plus untracked
files that are not ignored: ``git ls-files -co --exclude-standard``); otherwise
the folder itself (hidden folders, virtual environments and caches skipped). A
size cap stops a stray dataset or checkpoint from being shipped by accident.

How: ``rsync --files-from`` when both ends have rsync (its size+mtime quick
check makes a re-sync cost one round trip); otherwise a tar stream over the
same SSH master, with a manifest of sizes, mtimes and hashes kept on the host
so only changed files travel and deleted ones are removed.

The harness (``trainium_lens/__init__.py`` and ``harness/``, plus the small
remote wrapper) is uploaded only when its content hash differs from the one
stored on the host.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import stat as statmod
import subprocess
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

from trainium_lens.errors import TargetError
from trainium_lens.model import figures
from trainium_lens.targets.ssh.conn import SshConnection, explain_ssh_failure

DEFAULT_CAP_BYTES = 200 * 1024 * 1024
MAX_FILES = 50_000
# Folders never worth shipping when the workspace is not a git repo.
_SKIP_DIRS = {
    "__pycache__",
    "node_modules",
    ".venv",
    "venv",
    ".tox",
    ".mypy_cache",
    ".pytest_cache",
    ".trainium-lens",
    "build",
    "dist",
}
PACKAGE_DIR = Path(__file__).resolve().parents[2]  # .../trainium_lens


@dataclass
class FileSet:
    root: Path
    files: list[str] = field(default_factory=list)  # POSIX paths relative to root
    sizes: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.sizes.values())


def workspace_files(root: Path, cap_bytes: int = DEFAULT_CAP_BYTES) -> FileSet:
    """The files to sync; ``TargetError`` naming the biggest ones over the cap."""
    root = Path(root)
    listed = _git_files(root)
    sizes = _sizes(root, listed) if listed is not None else _walk(root, cap_bytes)
    fs = FileSet(root=root, files=sorted(sizes), sizes=sizes)
    if fs.total > cap_bytes or len(fs.files) > MAX_FILES:
        biggest = sorted(fs.sizes.items(), key=lambda kv: -kv[1])[:3]
        names = ", ".join(f"{n} ({figures.nbytes(s)})" for n, s in biggest)
        raise TargetError(
            f"the workspace is too big to sync ({len(fs.files)} files, {figures.nbytes(fs.total)}; cap "
            f"{figures.nbytes(cap_bytes)}); biggest: {names}: git-ignore large files or profile from a "
            f"smaller folder"
        )
    return fs


def with_files(fs: FileSet, names: list[str]) -> FileSet:
    """``fs`` and ``names`` (a job's own files the listing leaves out: ``fix``'s copies
    under ``.trainium-lens/fixes/``); regular files and links only, as listed files."""
    sizes = {**_sizes(fs.root, [n for n in names if n not in fs.sizes]), **fs.sizes}
    return FileSet(root=fs.root, files=sorted(sizes), sizes=sizes)


def _git_files(root: Path) -> list[str] | None:
    try:
        proc = subprocess.run(
            ["git", "-C", str(root), "ls-files", "-co", "--exclude-standard", "-z"],
            capture_output=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None  # not a git work tree
    return [n.decode("utf-8", "surrogateescape") for n in proc.stdout.split(b"\0") if n]


def _sizes(root: Path, names: list[str]) -> dict[str, int]:
    """Regular files and symlinks among ``names`` (git also lists files deleted
    from the work tree, and submodules), with their sizes: one lstat each."""
    out: dict[str, int] = {}
    for name in names:
        try:
            st = os.lstat(root / name)
        except OSError:
            continue
        if statmod.S_ISREG(st.st_mode) or statmod.S_ISLNK(st.st_mode):
            out[name] = st.st_size
    return out


def _walk(root: Path, cap_bytes: int) -> dict[str, int]:
    """The folder's files (scandir: the size comes with the listing)."""
    out: dict[str, int] = {}
    total = 0
    todo = [("", str(root))]
    while todo:
        rel, folder = todo.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            name = f"{rel}{entry.name}"
            try:
                if entry.is_dir(follow_symlinks=False):
                    if (
                        not entry.name.startswith(".")
                        and entry.name not in _SKIP_DIRS
                        and not entry.name.endswith(".egg-info")
                    ):
                        todo.append((name + "/", entry.path))
                    continue
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if statmod.S_ISREG(st.st_mode) or statmod.S_ISLNK(st.st_mode):
                out[name] = st.st_size
                total += st.st_size
        if total > cap_bytes * 2 or len(out) > MAX_FILES * 2:
            break  # enough to report "too big" without walking a whole disk
    return out


# -- rsync --------------------------------------------------------------------------
def local_rsync_ok() -> bool:
    """rsync ≥ 3.0 here (``-s``: paths travel inside the protocol, never through
    the remote shell)."""
    try:
        out = subprocess.run(["rsync", "--version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    match = re.search(r"version\s+(\d+)\.", out.stdout)
    return match is not None and int(match.group(1)) >= 3


def rsync_files(conn: SshConnection, fs: FileSet, remote_src: str, timeout: float = 600) -> None:
    listing = b"".join(n.encode("utf-8", "surrogateescape") + b"\0" for n in fs.files)
    # --modify-window=-1: compare mtimes to the nanosecond. The default (whole
    # seconds) skips a same-size edit saved within a second of the last sync,
    # which would profile stale code.
    argv = [
        "rsync",
        "-a",
        "-s",
        "--modify-window=-1",
        "--from0",
        "--files-from=-",
        "-e",
        conn.rsync_shell(),
        "--",
        str(fs.root) + "/",
        f"{conn.host}:{remote_src.rstrip('/')}/",
    ]
    try:
        proc = subprocess.run(argv, input=listing, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise TargetError(f"{conn.host}: syncing the workspace took over {timeout:.0f} s") from None
    if proc.returncode != 0:
        err = proc.stderr.decode("utf-8", "replace")
        if proc.returncode == 255 or "connection" in err.lower():
            raise TargetError(explain_ssh_failure(conn.host, err))
        last = [ln for ln in err.splitlines() if ln.strip()][-1:] or [f"exit {proc.returncode}"]
        raise TargetError(f"{conn.host}: rsync failed: {last[0][:200]}")


# -- tar + manifest -------------------------------------------------------------------
def _sha(path: Path) -> str:
    if path.is_symlink():
        return "link:" + os.readlink(path)
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def plan_tar(fs: FileSet, remote: dict[str, list]) -> tuple[list[str], list[str], dict]:
    """(files to send, files to delete, the new manifest) against the host's manifest
    ``{path: [size, mtime_ns, sha256]}``: size+mtime first, the hash only when those differ."""
    send, manifest = [], {}
    for name in fs.files:
        st = os.lstat(fs.root / name)
        old = remote.get(name)
        if old and old[0] == st.st_size and old[1] == st.st_mtime_ns:
            manifest[name] = old
            continue
        sha = _sha(fs.root / name)
        manifest[name] = [st.st_size, st.st_mtime_ns, sha]
        if not old or old[2] != sha:
            send.append(name)
    delete = sorted(set(remote) - set(manifest))
    return send, delete, manifest


# Runs on the host with its Python (3.8+, stdlib only): header line, then a tar.
_TAR_RECEIVER = r"""
import json, os, sys, tarfile
trusted = {"filter": "fully_trusted"} if hasattr(tarfile, "fully_trusted_filter") else {}
src, manifest_path = sys.argv[1], sys.argv[2]
stdin = sys.stdin.buffer
header = json.loads(stdin.readline())
os.makedirs(src, exist_ok=True)
root = os.path.realpath(src)
def inside(name):
    path = os.path.realpath(os.path.join(root, name))
    return path.startswith(root + os.sep)
with tarfile.open(fileobj=stdin, mode="r|") as tar:
    for member in tar:
        if not (member.isfile() or member.issym()) or not inside(member.name):
            raise SystemExit("refusing tar member " + repr(member.name))
        target = os.path.join(root, member.name)
        if os.path.lexists(target) and (os.path.islink(target) or member.issym()):
            os.unlink(target)
        tar.extract(member, root, set_attrs=member.isfile(), **trusted)  # checked above
for name in header["delete"]:
    if inside(name) and os.path.lexists(os.path.join(root, name)):
        os.unlink(os.path.join(root, name))
tmp = manifest_path + ".tmp"
with open(tmp, "w") as f:
    json.dump(header["manifest"], f)
os.replace(tmp, manifest_path)
"""


def tar_files(
    conn: SshConnection,
    fs: FileSet,
    python: str,
    remote_src: str,
    manifest_path: str,
    remote_manifest: dict,
    timeout: float = 600,
) -> int:
    """Send what changed as a tar stream; return how many files were sent."""
    send, delete, manifest = plan_tar(fs, remote_manifest)
    if not send and not delete and manifest == remote_manifest:
        return 0
    buf = io.BytesIO()
    buf.write(json.dumps({"delete": delete, "manifest": manifest}).encode() + b"\n")
    with tarfile.open(fileobj=buf, mode="w|", format=tarfile.PAX_FORMAT) as tar:
        for name in send:
            tar.add(fs.root / name, arcname=name, recursive=False)
    proc = conn.run(
        'exec "$1" -c "$2" "$3" "$4"',
        [python, _TAR_RECEIVER, remote_src, manifest_path],
        input=buf.getvalue(),
        timeout=timeout,
    )
    if proc.returncode != 0:
        last = proc.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["?"]
        raise TargetError(f"{conn.host}: copying the workspace failed: {last[0][:200]}")
    return len(send)


# -- the harness bundle -------------------------------------------------------------
def harness_bundle() -> tuple[str, bytes]:
    """(content hash, tar bytes) of what the host needs to run the harness:
    ``trainium_lens/__init__.py``, ``trainium_lens/harness/**.py`` and the wrapper."""
    members: list[tuple[str, Path]] = [("trainium_lens/__init__.py", PACKAGE_DIR / "__init__.py")]
    harness = PACKAGE_DIR / "harness"
    for path in sorted(harness.rglob("*.py")):
        if "__pycache__" not in path.parts:
            members.append((f"trainium_lens/{path.relative_to(PACKAGE_DIR).as_posix()}", path))
    members.append(("ssh_wrapper.py", Path(__file__).with_name("wrapper.py")))
    digest = hashlib.sha256()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for arcname, path in members:
            data = path.read_bytes()
            digest.update(arcname.encode() + b"\0" + data + b"\0")
            info = tarfile.TarInfo(arcname)
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    return digest.hexdigest()[:32], buf.getvalue()


_LENS_INSTALL = r"""
set -e
wd=$1
rm -rf "$wd/lens.new" "$wd/lens.old"
mkdir -p "$wd/lens.new"
tar -xf - -C "$wd/lens.new"
printf '%s\n' "$2" > "$wd/lens.new/.hash"
if [ -e "$wd/lens" ]; then mv "$wd/lens" "$wd/lens.old"; fi
mv "$wd/lens.new" "$wd/lens"
rm -rf "$wd/lens.old"
"""


def upload_harness(conn: SshConnection, work_dir: str, digest: str, data: bytes) -> None:
    proc = conn.run(_LENS_INSTALL, [work_dir, digest], input=data, timeout=120)
    if proc.returncode != 0:
        last = proc.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["?"]
        raise TargetError(f"{conn.host}: could not install the harness in {work_dir}: {last[0][:200]}")

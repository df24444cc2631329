"""Run the harness on a remote host over OpenSSH.

One run, all over one shared (ControlMaster) connection:

1. ``connect``: bring up the master (auth and host-key problems surface here
   as one clear line each);
2. ``prepare`` (one round trip): make the work dir, resolve it to an absolute
   path, pick the remote Python, say whether rsync is there, report the harness
   hash stored on the host (and the sync manifest when tar is used);
3. ``sync``: the workspace into ``<work dir>/src`` (rsync or tar, see sync.py),
   the harness into ``<work dir>/lens`` when its hash differs;
4. run ``wrapper.py`` there (``lens/ssh_wrapper.py``) with the job spec on stdin, through
   ``stream.run_harness_process``; the wrapper streams the harness's events,
   holds the host's lock, and kills the remote process group when the channel
   drops. A cancel or timeout kills that group through the master (``kill_remote``).

Artifacts stay on the host (``artifacts.location`` is the host); ``fetch``
copies them here on demand.
"""

from __future__ import annotations

import concurrent.futures
import json
import shutil
import subprocess
import tarfile
import tempfile
import threading
import time
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from trainium_lens.errors import Cancelled, HarnessError, TargetError, TimedOut
from trainium_lens.harness.spec import ScriptSpec
from trainium_lens.model.job import Job, workspace_id
from trainium_lens.model.paths import is_run_id
from trainium_lens.model.script import ScriptCommand
from trainium_lens.targets.base import EventSink, Target
from trainium_lens.targets.outcome import Outcome
from trainium_lens.targets.ssh import scripts as ssh_scripts
from trainium_lens.targets.ssh import sync
from trainium_lens.targets.ssh.conn import SshConnection, SshFailure, classify_ssh_failure
from trainium_lens.targets.ssh.script import run_script_remote
from trainium_lens.targets.stream import EndedWithoutResult, run_harness_process

if TYPE_CHECKING:
    from trainium_lens.targets.warm.slot import WarmSlot


def _no_events(_event: dict) -> None:
    pass


class SshTarget(Target):
    def __init__(
        self,
        host: str,
        ssh_config: str | None = None,
        remote_python: str | None = None,
        work_dir: str | None = None,
        *,
        control_path_dir: Path | None = None,
        sync_cap_bytes: int = sync.DEFAULT_CAP_BYTES,
        lock_wait_s: float = ssh_scripts.LOCK_WAIT_S,
        use_rsync: bool = True,
    ) -> None:
        self.host = host
        self.conn = SshConnection(host, ssh_config=ssh_config, control_path_dir=control_path_dir)
        self.remote_python = remote_python
        self.work_dir = work_dir
        self.sync_cap_bytes = sync_cap_bytes
        self.lock_wait_s = lock_wait_s
        self.use_rsync = use_rsync and sync.local_rsync_ok()
        self.last_harness_s: float | None = None
        #: A ``warm.WarmSlot`` when runs should use a warm worker on the host (the
        #: language server sets one; the CLI stays cold).
        self.warm: WarmSlot | None = None
        self._work_dirs: dict[str, str] = {}  # workspace id -> its work dir on the host (absolute)

    # -- steps ------------------------------------------------------------------
    def prepare_args(self, ws_id: str, mode: str) -> list[str]:
        return [
            self.work_dir or "",
            self.remote_python or "",
            "0" if self.use_rsync else "1",
            ws_id,
            ssh_scripts.DEFAULT_PYTHONS,
            mode,
        ]

    def prepare(self, workspace: Path) -> dict:
        """One round trip: the work dir (absolute), the Python, rsync, harness hash."""
        proc = self.conn.run(
            ssh_scripts.PREPARE_SCRIPT, self.prepare_args(workspace_id(workspace), "run"), timeout=60
        )
        err = proc.stderr.decode("utf-8", "replace")
        if proc.returncode != 0:
            raise TargetError(f"{self.host}: " + remote_reason(err, proc.returncode))
        text = proc.stdout.decode("utf-8", "surrogateescape")
        head, _, manifest = text.partition("--manifest--\n")
        info: dict = {"manifest": None}
        for line in head.splitlines():
            key, _, value = line.partition("=")
            info[key] = value
        if "--manifest--" in text:
            try:
                info["manifest"] = json.loads(manifest) if manifest.strip() else {}
            except json.JSONDecodeError:
                info["manifest"] = {}
        if not info.get("wd") or not info.get("python"):
            raise TargetError(f"{self.host}: unexpected answer from the host: {text[:200]!r}")
        self._work_dirs[workspace_id(workspace)] = info["wd"]  # for remove_runs (profile's and run's)
        return info

    def sync(self, workspace: Path, info: dict, on_event: EventSink, fs: sync.FileSet | None = None) -> None:
        fs = fs or sync.workspace_files(workspace, self.sync_cap_bytes)
        wd = info["wd"]
        on_event(
            {"event": "stage", "stage": "sync", "message": f"syncing {len(fs.files)} files to {self.host}"}
        )
        if self.use_rsync and info.get("rsync") == "yes":
            sync.rsync_files(self.conn, fs, f"{wd}/src")
        else:
            sync.tar_files(
                self.conn,
                fs,
                info["python"],
                f"{wd}/src",
                f"{wd}/src.manifest.json",
                info.get("manifest") or {},
            )
        digest, bundle = sync.harness_bundle()
        if info.get("lens") != digest:
            on_event({"event": "stage", "stage": "sync", "message": f"installing the harness on {self.host}"})
            sync.upload_harness(self.conn, wd, digest, bundle)

    def run(
        self,
        job: Job,
        on_event: EventSink,
        cancel: threading.Event | None = None,
        timeout: float | None = None,
    ) -> dict:
        if on_event is None:  # tolerated: some callers want no events
            on_event = _no_events
        started = time.monotonic()

        def check() -> None:  # between the steps before the harness starts
            if cancel is not None and cancel.is_set():
                raise Cancelled("cancelled")
            if timeout is not None and time.monotonic() - started > timeout:
                raise TimedOut(f"timed out after {timeout:g} s")

        on_event({"event": "stage", "stage": "connect", "message": f"connecting to {self.host}"})
        self.conn.master()
        check()
        # List the workspace here while the host answers the prepare round trip.
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            listing = pool.submit(sync.workspace_files, job.workspace, self.sync_cap_bytes)
            info = self.prepare(job.workspace)
            fs = sync.with_files(listing.result(), job.ships)
        check()
        self.sync(job.workspace, info, on_event, fs)
        check()
        wd = info["wd"]
        spec = job.to_spec(f"{wd}/src", f"{wd}/runs/{job.batch_id}", self.host)
        remote: dict = {}

        def forward(event: dict) -> None:
            kind = event.get("event")
            if kind == "heartbeat":
                return
            if kind == "remote_process":
                # Only the first: the wrapper sends it before the harness (and so
                # any user code that might print look-alike lines) starts.
                if "pgid" not in remote:
                    remote.update(pgid=event.get("pgid"), wrapper=event.get("wrapper"))
                return
            if kind == "batch":
                remote["batch"] = (event.get("path"), event.get("document"))
                # start → result of the harness on the host (for benchmarks)
                self.last_harness_s = event.get("harness_s")
                return
            on_event(event)

        def read_result(path: str) -> dict:
            cached = remote.get("batch")
            if cached and cached[0] == path and isinstance(cached[1], dict):
                document = cached[1]
            else:
                document = self._read_json(path)
            return _mark_remote(document, self.host)

        argv = self.conn.argv(ssh_scripts.RUN, [info["python"], wd, str(int(self.lock_wait_s))])
        try:
            left = None if timeout is None else max(timeout - (time.monotonic() - started), 0.1)
            if self.warm is not None and self.warm.takes(job):
                return self._run_warm(info, spec, on_event, cancel, left)
            kill = lambda: self.kill_remote(remote)  # noqa: E731 (the stream's callback)
            return run_harness_process(argv, spec, forward, cancel, left, read_result=read_result, kill=kill)
        except TimedOut:  # stream counted from the harness start; the user, from ours
            raise TimedOut(f"timed out after {timeout:g} s") from None
        except TargetError as err:
            raise self._explain_failure(err) from None
        except HarnessError as err:
            if err.kind == "torch_missing":  # say which host, and the option that fixes it
                raise HarnessError(err.kind, f"{self.host}: {err} (or pass --remote-python PATH)") from None
            raise

    def _run_warm(
        self,
        info: dict,
        spec: dict,
        on_event: EventSink,
        cancel: threading.Event | None,
        timeout: float | None,
    ) -> dict:
        """The job on the host's warm worker (started there on first use, over the
        master; a new harness version or Python starts a new one)."""
        from trainium_lens.targets.warm.worker import Launch

        assert self.warm is not None
        wd, idle = info["wd"], self.warm.idle_s
        launch = Launch(
            self.conn.argv(ssh_scripts.WARM, [info["python"], wd, f"{idle:g}"]),
            key=(info["python"], wd, sync.harness_bundle()[0], idle),
        )
        return self.warm.run(
            launch,
            spec,
            on_event,
            cancel,
            timeout,
            read_result=self.read_result,
            read_batch=lambda _path, document: _mark_remote(document, self.host),
            lock=f"{wd}/lock",
            inline_batch=True,
        )

    # -- failure handling ---------------------------------------------------------------
    def kill_remote(self, remote: dict) -> None:
        """Stop the remote harness group (through the master: the run's own ssh is
        about to be killed, which alone would not stop anything on the host)."""
        pgid, wrapper = remote.get("pgid"), remote.get("wrapper")
        if not isinstance(pgid, int) or not isinstance(wrapper, int) or min(pgid, wrapper) < 2:
            return  # not started yet: the wrapper stops itself when its channel closes
        try:
            self.conn.run(ssh_scripts.KILL, [str(pgid), str(wrapper)], timeout=15)
        except TargetError:
            pass  # connection gone: the wrapper's heartbeat notices and kills the group

    def _explain_failure(self, err: TargetError) -> TargetError:
        text = str(err)
        if ssh_scripts.MARK in text:
            return TargetError(f"{self.host}: {text.split(ssh_scripts.MARK, 1)[1]}")
        try:
            self.conn.run("true", timeout=15)
        except TargetError as now:
            return TargetError(
                f"{self.host}: lost the SSH connection during the run ({now}); the host "
                f"side stops the run when its connection drops, and results stored "
                f"earlier are untouched: run again once the host is reachable"
            )
        if (isinstance(err, EndedWithoutResult) and err.code == 255) or classify_ssh_failure(
            text
        ) == "closed":
            # ssh's own status for a connection that ended under it; the host answers
            # again, so it was the connection (a blip, an idle timeout on the way)
            return TargetError(
                f"{self.host}: lost the SSH connection during the run (ssh: {text}); the "
                f"host side stopped the run when its connection dropped, and results "
                f"stored earlier are untouched: the host answers again, run again"
            )
        return TargetError(f"{self.host}: {text}")

    def read_result(self, path: str) -> dict:
        """A batch document the harness wrote on the host, marked as made there."""
        return _mark_remote(self._read_json(path), self.host)

    def _read_json(self, path: str) -> dict:
        proc = self.conn.run('exec cat -- "$1"', [path], timeout=120)
        if proc.returncode != 0:
            raise TargetError(f"{self.host}: cannot read the result {path}")
        try:
            data = json.loads(proc.stdout)
        except json.JSONDecodeError as exc:
            raise TargetError(f"{self.host}: the result {path} is not valid JSON: {exc.msg}") from None
        if not isinstance(data, dict):
            raise TargetError(f"{self.host}: the result {path} is not a JSON object")
        return data

    def run_script(
        self,
        command: ScriptCommand,
        spec: ScriptSpec,
        on_event: EventSink,
        *,
        workspace: Path,
        cwd: Path,
        env: dict[str, str] | None = None,
        cancel: threading.Event | None = None,
        timeout: float | None = None,
        capture: bool = False,
    ) -> Outcome:
        """The command on the host, in the synced copy of ``cwd`` (``script.py``); its
        run folder is in the host's work dir, as a profile's."""
        argv, launcher, inner = command.argv, command.launcher, command.inner
        return run_script_remote(
            self, argv, launcher, workspace, cwd, spec, on_event, cancel, timeout, env, capture, inner
        )

    def remove_runs(self, workspace: Path, batch_ids: list[str]) -> None:
        wd = self._work_dirs.get(workspace_id(workspace))
        ids = [b for b in batch_ids if is_run_id(b)]
        if wd is None or not ids:
            return  # no run of this workspace here yet: its folders go after the next one
        proc = self.conn.run(ssh_scripts.REMOVE_RUNS, [wd, *ids], timeout=60)
        if proc.returncode != 0:
            raise TargetError(f"{self.host}: could not remove old run folders")

    # -- artifacts ----------------------------------------------------------------------
    def fetch(self, remote_path: str, dest: Path, *, workspace: Path) -> Path:
        """Copy a file or folder from the host to ``dest`` (the copy's own path, as
        for the local target), streamed as tar over the master; returns ``dest``.

        ``dest`` must not exist: a fetch never removes or replaces anything it did
        not create (the path may come from a stored result), and the host sends
        it only when it lies in a run folder of ``workspace`` there (``ssh_scripts.FETCH``).
        The copy is unpacked into a fresh staging folder beside ``dest`` and
        moved into place."""
        path = PurePosixPath(remote_path)
        if not path.is_absolute() or ".." in path.parts:
            raise TargetError(f"not an absolute path on {self.host}: {remote_path}")
        dest = Path(dest)
        if dest.exists() or dest.is_symlink():
            raise TargetError(f"{dest} already exists: not replaced (remove it to fetch again)")
        self.conn.master()
        dest.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".fetch-", dir=dest.parent))
        try:
            argv = self.conn.argv(
                ssh_scripts.FETCH, [self.work_dir or "", workspace_id(workspace), str(path.parent), path.name]
            )
            with subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE
            ) as proc:
                try:
                    with tarfile.open(fileobj=proc.stdout, mode="r|") as tar:
                        if hasattr(tarfile, "data_filter"):  # refuse links/paths out of staging
                            tar.extractall(staging, filter="data")
                        else:
                            tar.extractall(staging)
                except tarfile.TarError:
                    pass  # an empty stream: the reason is on stderr
                assert proc.stderr is not None
                err = proc.stderr.read().decode("utf-8", "replace")
                code = proc.wait()
            if code == 255:
                raise SshFailure(self.host, err)
            if code != 0 or not (staging / path.name).exists():
                last = [ln for ln in err.strip().splitlines() if ln.strip()][-1:] or ["?"]
                reason = "it is gone from the host" if "No such file" in last[0] else last[0][:200]
                reason = reason.split(ssh_scripts.MARK, 1)[-1]
                raise TargetError(f"{self.host}: cannot fetch {remote_path}: {reason}")
            if dest.exists() or dest.is_symlink():  # made meanwhile (another fetch): keep it
                raise TargetError(f"{dest} already exists: not replaced (remove it to fetch again)")
            (staging / path.name).rename(dest)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return dest

    def close(self) -> None:
        if self.warm is not None:
            self.warm.close()
        self.conn.close()


def _mark_remote(document: dict, host: str) -> dict:
    """Results made here say where they ran and where their artifacts are."""
    for result in document.get("results") or []:
        if isinstance(result, dict):
            result["host"] = host
            if isinstance(result.get("artifacts"), dict):
                result["artifacts"]["location"] = host
    return document


def remote_reason(stderr: str, code: int) -> str:
    for line in reversed(stderr.splitlines()):
        if ssh_scripts.MARK in line:
            return line.split(ssh_scripts.MARK, 1)[1].strip()
    last = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    return last[-1][:200] if last else f"the remote command failed (exit {code})"

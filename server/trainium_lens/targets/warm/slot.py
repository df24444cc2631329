"""A warm harness per target, held by the language server (docs/harness.md, "Warm worker").

``WarmSlot`` is what a target holds: at most one worker process
(``harness/runtime/worker.py``, a fork server with torch imported) that runs each job
in a fresh forked child. It is started on the first warm job, reused while
its key (interpreter, work dir, harness version) stays the same, replaced
silently when it died between jobs, and ends:

* by itself after ``idle_s`` seconds without a job (the worker's ``--idle``);
* at once on ``close()`` (the release command, new settings, shutdown);
* when this process dies, even by SIGKILL: its stdin (our pipe, or the SSH
  channel) closes and the worker kills its job and exits.

One job: the spec goes to the worker as ``{"op": "run", ...}``; the child's
harness events come back as from a cold run, framed by the worker's ``job``
and ``job_exit`` events. Cancel and timeout send ``{"op": "cancel"}`` (the worker
kills the job's process group, also on an SSH host, with no extra round trip);
when the worker does not confirm, the worker itself is stopped. A job that dies
without a result (``os._exit``, a segfault, the OOM killer) gives the same
error as a cold run; the worker, which never runs user code, stays warm.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable

from trainium_lens.errors import HarnessError, TargetError
from trainium_lens.model.job import Job, wants_ranks
from trainium_lens.targets.stream import (
    StderrTail,
    Watch,
    describe_exit,
)
from trainium_lens.targets.warm.worker import (
    CANCEL_CONFIRM_S,
    EXIT_WAIT_S,
    POLL_S,
    Launch,
    Worker,
    WorkerGone,
)

#: ``on_change`` payload: {"state": "warm"|"none", "host", "pid", "idle_s"}.
ChangeSink = Callable[[dict], None]


class WarmSlot:
    """The warm worker a target holds (at most one)."""

    def __init__(
        self, host: str, idle_s: Callable[[], float] | float = 300.0, on_change: ChangeSink | None = None
    ) -> None:
        self.host = host
        self._idle = idle_s
        self.on_change = on_change
        self.worker: Worker | None = None
        self._lock = threading.Lock()  # one job at a time per target
        self.last_start_s: float | None = None  # start → ready of the last new worker

    @property
    def idle_s(self) -> float:
        return float(self._idle() if callable(self._idle) else self._idle)

    @property
    def enabled(self) -> bool:
        return self.idle_s > 0

    def takes(self, job: Job) -> bool:
        """Does ``job`` run on the warm worker? Not when it is off, nor a torchrun job
        (model/job.wants_ranks: its agent and ranks live in process groups of their own,
        so it starts cold)."""
        return self.enabled and not wants_ranks(job)

    # -- state --------------------------------------------------------------------------
    def held(self) -> dict | None:
        """{host, pid, idle_s} of a live worker, else None."""
        worker = self.worker
        if worker is None or worker.ready is None or not worker.alive():
            return None
        return {"host": self.host, "pid": worker.pid, "idle_s": self.idle_s}

    def _notify(self, state: str, worker: Worker | None) -> None:
        if self.on_change is None:
            return
        try:
            self.on_change(
                {
                    "state": state,
                    "host": self.host,
                    "pid": worker.pid if worker else None,
                    "idle_s": self.idle_s,
                }
            )
        except Exception:  # noqa: BLE001 - a status display must never fail a run
            pass

    def _watch_exit(self, worker: Worker) -> None:
        """Tell the status display when the worker ends by itself (idle)."""

        def wait() -> None:
            worker.proc.wait()
            if self.worker is worker or self.worker is None:
                self._notify("none", None)

        threading.Thread(target=wait, name="warm-worker-exit", daemon=True).start()

    def close(self) -> bool:
        """Stop the worker now; True if there was one."""
        worker, self.worker = self.worker, None
        if worker is None:
            return False
        was_alive = worker.alive()
        worker.stop()
        self._notify("none", None)
        return was_alive

    # -- jobs -----------------------------------------------------------------------------
    def _worker_for(self, launch: Launch, emit: Callable[[dict], None], watch: Watch) -> Worker:
        worker = self.worker
        if worker is not None and (
            worker.launch.key != launch.key or not worker.alive() or not worker.drain()
        ):
            self.worker = None
            worker.stop()
            worker = None
        if worker is None:
            emit(
                {
                    "event": "stage",
                    "stage": "import",
                    "function": None,
                    "message": f"starting a warm worker on {self.host} (importing torch)",
                }
            )
            started = time.monotonic()
            worker = Worker(launch, self.host)
            try:
                worker.wait_ready(emit, watch)
            except BaseException:
                worker.stop()
                raise
            self.last_start_s = time.monotonic() - started
            self.worker = worker
            self._watch_exit(worker)
            self._notify("warm", worker)
        return worker

    def run(
        self,
        launch: Launch,
        spec: dict,
        on_event: Callable[[dict], None] | None,
        cancel: threading.Event | None,
        timeout: float | None,
        *,
        read_result: Callable[[str], dict],
        lock: str | None = None,
        inline_batch: bool = False,
        read_batch: Callable[[str, dict], dict] | None = None,
    ) -> dict:
        """Run one job on the warm worker (started or replaced as needed); the
        same outcomes as ``stream.run_harness_process``. With ``inline_batch`` the
        worker sends the batch document after the result; ``read_batch(path,
        document)`` finishes it (default: as is) instead of ``read_result(path)``."""
        emit = on_event or (lambda _event: None)
        watch = Watch(cancel, timeout)
        command = {"op": "run", "spec": spec, "lock": lock, "inline_batch": inline_batch}
        with self._lock:
            for attempt in (1, 2):
                worker = self._worker_for(launch, emit, watch)
                try:
                    document = self._job(worker, command, emit, watch)
                except _Replaced:
                    # It died between jobs (before taking this one): replace it silently.
                    self.worker = None
                    worker.stop()
                    if attempt == 2:
                        raise TargetError(f"the warm worker ended: {worker.why()}") from None
                    continue
                if isinstance(document, dict):
                    return (read_batch or (lambda _p, d: d))(document["path"], document["document"])
                return read_result(document)
            raise AssertionError("unreachable")

    def _job(self, worker: Worker, command: dict, emit: Callable[[dict], None], watch: Watch) -> str | dict:
        """Run the command; the result path, or the worker's ``batch`` event."""
        worker.tail = StderrTail()  # this job's last words only
        try:
            worker.send(command)
        except WorkerGone:
            raise _Replaced() from None
        worker.busy = True
        job_pid = None
        result_path: str | None = None
        error_event: dict | None = None
        batch: dict | None = None
        status: int | None = None
        final_at: float | None = None
        while status is None:
            reason = watch.reason() if final_at is None else None
            if reason is not None:
                self._cancel(worker)
                raise reason
            if final_at is not None and time.monotonic() - final_at > EXIT_WAIT_S:
                break  # all said; the worker is drained before its next job
            try:
                event = worker.next_event(POLL_S)
            except WorkerGone:
                if job_pid is None:
                    raise _Replaced() from None
                self.worker = None
                self._notify("none", None)
                raise TargetError(
                    f"the harness ended without a result: the warm worker ended ({worker.why()})"
                ) from None
            if event is None:
                continue
            kind = event.get("event")
            if kind == "job":
                job_pid = event.get("pid")
            elif kind == "job_exit":
                status = int(event.get("status") or 0)
                worker.busy = False
            elif kind == "batch":
                batch = event
            elif kind == "ready":
                continue
            else:
                if kind == "error" and error_event is None:
                    error_event = event
                elif kind == "result" and isinstance(event.get("path"), str):
                    result_path = event["path"]
                if kind in ("error", "result"):
                    final_at = time.monotonic()
                emit(event)
        if error_event is not None:
            raise HarnessError.from_event(error_event)
        if result_path is None:
            raise TargetError(
                f"the harness ended without a result: {describe_exit(status, worker.tail.last_line())}"
            )
        if batch is not None and batch.get("path") == result_path and isinstance(batch.get("document"), dict):
            return batch
        return result_path

    def _cancel(self, worker: Worker) -> None:
        """Stop the job: the worker kills its group and confirms; else stop the worker."""
        try:
            worker.send({"op": "cancel"})
        except WorkerGone:
            pass
        limit = time.monotonic() + CANCEL_CONFIRM_S
        while worker.busy and time.monotonic() < limit:
            try:
                event = worker.next_event(POLL_S)
            except WorkerGone:
                break
            if event is not None and event.get("event") == "job_exit":
                worker.busy = False
        if worker.busy:
            self.worker = None
            worker.stop()
            self._notify("none", None)


class _Replaced(Exception):
    """The worker was gone before it took the job."""


def held_workers(host: str = "local") -> list[dict]:
    """Warm workers for ``host`` that processes on this machine hold (a /proc scan,
    Linux; for ``doctor``): a local worker, or the ssh client of a remote one.
    Their forked jobs are not counted. ``[{"pid", "age_s"}]``."""
    procs: dict[int, tuple[list[str], int, float]] = {}
    try:
        entries = os.listdir("/proc")
        ticks = os.sysconf("SC_CLK_TCK")
        with open("/proc/uptime") as handle:
            uptime = float(handle.read().split()[0])
    except (OSError, ValueError):
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                argv = handle.read().decode("utf-8", "replace").split("\0")
            if not any("trainium_lens.harness.runtime.worker" in a for a in argv):
                continue
            with open(f"/proc/{entry}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] == "Z":
            continue
        procs[int(entry)] = (argv, int(fields[1]), uptime - int(fields[19]) / ticks)
    held = []
    for pid, (argv, parent, age) in sorted(procs.items()):
        if parent in procs:
            continue  # a job forked by a worker
        is_ssh = os.path.basename(argv[0]) == "ssh"
        if (host in ("", "local") and not is_ssh) or (is_ssh and host in argv):
            held.append({"pid": pid, "age_s": round(age, 1)})
    return held

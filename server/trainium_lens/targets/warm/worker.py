"""The warm worker's process protocol, client side: start one (``harness/runtime/worker.py``),
send it commands, read its framed events, stop it. What a target does with one
(when to start, reuse, replace or end it) is ``slot.py``'s policy."""

from __future__ import annotations

import json
import queue
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from trainium_lens.errors import TargetError
from trainium_lens.targets.stream import (
    EOF,
    StderrTail,
    Watch,
    describe_exit,
    kill_group,
    parse_line,
    start_process,
    start_readers,
)

#: Seconds the worker may take to confirm a cancel (its grace is 2 s).
CANCEL_CONFIRM_S = 5.0


#: Seconds to wait for ``job_exit`` after the final event (the child exits at once).
EXIT_WAIT_S = 5.0


#: Seconds a new worker may take to import torch before it counts as broken.
START_LIMIT_S = 300.0


POLL_S = 0.05


@dataclass
class Launch:
    """How to start a worker: argv, its environment and folder, and a key (a
    different key: a different worker)."""

    argv: Sequence[str]
    key: tuple
    env: dict[str, str] | None = None
    cwd: str | None = None


class WorkerGone(Exception):
    """The worker's stdout closed (it exited, or its connection went)."""


class Worker:
    """One worker process, seen from here."""

    def __init__(self, launch: Launch, host: str) -> None:
        self.launch, self.host = launch, host
        self.tail = StderrTail()
        self.proc = start_process(launch.argv, launch.env, launch.cwd)
        self.lines, _ = start_readers(self.proc, self.tail, lambda line: self.tail.add(line))
        self.ready: dict | None = None
        self.busy = False  # a job's ``job_exit`` is still to come
        self.gone = False
        self.started = time.monotonic()

    # -- low level ------------------------------------------------------------------
    def send(self, command: dict) -> None:
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(json.dumps(command).encode("utf-8") + b"\n")
            self.proc.stdin.flush()
        except (OSError, ValueError):
            raise WorkerGone() from None

    def next_event(self, timeout: float) -> dict | None:
        """The next event, None after ``timeout``; ``WorkerGone`` at EOF."""
        if self.gone:
            raise WorkerGone()
        try:
            item = self.lines.get(timeout=timeout)
        except queue.Empty:
            return None
        if item is EOF:
            self.gone = True
            raise WorkerGone()
        return parse_line(item)

    def alive(self) -> bool:
        return not self.gone and self.proc.poll() is None

    def why(self) -> str:
        self.proc.poll()
        return describe_exit(self.proc.returncode, self.tail.last_line())

    # -- start and stop ---------------------------------------------------------------
    def wait_ready(self, emit: Callable[[dict], None], watch: Watch) -> None:
        limit = time.monotonic() + START_LIMIT_S
        while self.ready is None:
            watch.check()
            if time.monotonic() > limit:
                raise TargetError(f"the warm worker did not start in {START_LIMIT_S:g} s")
            try:
                event = self.next_event(POLL_S)
            except WorkerGone:
                raise TargetError(f"the warm worker did not start: {self.why()}") from None
            if event is None:
                continue
            if event.get("event") == "ready":
                self.ready = event
            elif event.get("event") == "output":
                emit(event)

    def drain(self) -> bool:
        """Wait out the previous job's ``job_exit``; False if it never came."""
        limit = time.monotonic() + EXIT_WAIT_S
        while self.busy and time.monotonic() < limit:
            try:
                event = self.next_event(POLL_S)
            except WorkerGone:
                return False
            if event is not None and event.get("event") == "job_exit":
                self.busy = False
        return not self.busy

    def stop(self, grace: float = 1.0) -> None:
        """Ask it to quit, close its stdin (its cue to kill any job and exit), then
        stop its group (locally: the worker; SSH: the ssh client, whose channel
        closing ends the remote worker)."""
        self.gone = True
        try:
            self.send({"op": "quit"})
        except WorkerGone:
            pass
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
        kill_group(self.proc, grace=1.0)

    @property
    def pid(self) -> int | None:
        return self.ready.get("pid") if self.ready else None

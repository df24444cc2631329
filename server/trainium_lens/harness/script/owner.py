"""``python -S -m trainium_lens.harness.script.owner [--lifeline FD] -- COMMAND...``:
the user's command (``trainium-lens run``), owned whole, as ``profile`` owns
the harness (``harness/reaper.py``).

This process becomes a child subreaper and starts the command in its own
process group (ours: the starter made us a session leader). Whatever the
command starts stays our descendant: a child in a session of its own, a
double-forked daemon, a plain background child that outlives its parent. When
the command exits, every descendant left is killed and we exit with the
command's status (killed by a signal: by the same signal), so nothing outlives
the run and nothing holds the command's output open after it (the starter
reads until the command's end, never until a daemon closes a pipe).

Stopped the same way, whatever stops it: SIGTERM (cancel, timeout: the
starter's ``kill_group``), SIGINT, SIGHUP and the end of file on ``--lifeline``
(a pipe the starter holds: it is gone, even by kill -9). Then the group is sent
SIGTERM first (srun ends its job step on it), given ``GRACE_S``, and swept.

``-S``: the boot folder's ``sitecustomize`` is first on ``PYTHONPATH`` and arms the
first Python it meets; this one is not the user's. A command that cannot be
started is said in the run's events file (``cannot_start``), where the
starter, here or on a host, reads it. Stdlib and the harness only.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

from trainium_lens.harness import reaper

RUN_ENV = "TRAINIUM_LENS_RUN"
PARENT_ENV = "TRAINIUM_LENS_RUN_PARENT"  # the armed process dies with its parent: us
GRACE_S = 0.5


def main(args: list[str]) -> int:
    lifeline = None
    if args[:1] == ["--lifeline"] and len(args) > 1 and args[1].isdigit():
        lifeline, args = int(args[1]), args[2:]
    if args[:1] == ["--"]:
        args = args[1:]
    if not args:
        sys.stderr.write(
            "usage: python -S -m trainium_lens.harness.script.owner [--lifeline FD] -- COMMAND...\n"
        )
        return 2
    reaper.become_subreaper()
    env = dict(os.environ)
    env[PARENT_ENV] = str(os.getpid())
    try:
        # srun must hear of our end to end its job (a SIGKILL would leave it running)
        proc = subprocess.Popen(args, env=env, preexec_fn=reaper.term_with_parent)
    except OSError as exc:
        _cannot_start(args[0], exc)
        return 127
    stopping = threading.Lock()

    def stop(code: int) -> None:
        if not stopping.acquire(blocking=False):
            return
        try:  # ours comes back to us too: the lock makes that stop a no-op
            os.killpg(0, signal.SIGTERM)
        except OSError:
            pass
        deadline = time.monotonic() + GRACE_S
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        reaper.kill_descendants()
        os._exit(code)

    for sig, code in ((signal.SIGTERM, 143), (signal.SIGINT, 130), (signal.SIGHUP, 129)):
        signal.signal(sig, lambda *_a, code=code: stop(code))
    if lifeline is not None:
        threading.Thread(target=_watch, args=(lifeline, stop), daemon=True).start()
    code = proc.wait()
    if not stopping.acquire(blocking=False):  # a stop is sweeping and will exit
        time.sleep(GRACE_S * 10)
    reaper.kill_descendants()  # what the command left: nothing outlives the run
    if code < 0:
        sys.stdout.flush()
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        return 128 - code
    return code


def _watch(fd: int, stop: object) -> None:
    try:
        while os.read(fd, 4096):
            pass
    except OSError:
        pass
    stop(137)  # type: ignore[operator]


def _cannot_start(name: str, exc: OSError) -> None:
    message = f"cannot start {name}: {exc.strerror or exc}"
    try:
        with open(os.environ.get(RUN_ENV, ""), encoding="utf-8") as handle:
            run_dir = json.load(handle)["run_dir"]
        line = json.dumps({"event": "cannot_start", "pid": os.getpid(), "t": time.time(), "message": message})
        with open(os.path.join(run_dir, "events.jsonl"), "a", encoding="utf-8") as out:
            out.write(line + "\n")
    except (OSError, ValueError, KeyError, TypeError):
        pass


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

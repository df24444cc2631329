"""Runs ON the SSH host (stdlib only, Python 3.8+): starts the harness so that
nothing is left behind when the run is cancelled or the connection drops.

``python lens/ssh_wrapper.py WORK_DIR LOCK_WAIT_S [--lifeline]`` with the job spec
(one JSON line) on stdin:

0. with ``--lifeline``, the rest of stdin is the client's lifeline (as for a
   local harness, ``harness/runtime/lifeline.py``): the client keeps it open for the
   whole run, so when the client ends in any way (SIGKILL included) its ssh
   passes the end of file on and the wrapper kills the harness group and exits,
   while still waiting for the lock too;

1. takes ``WORK_DIR/lock`` (flock); while another run holds it, says so
   (a ``queue`` stage event) and waits up to LOCK_WAIT_S, then gives up clearly;
2. starts ``python -m trainium_lens.harness`` in a new session (its own process
   group), passes it the lock (the lock lives as long as any of its processes)
   and tells the client the group id (``{"event": "remote_process", ...}``) so a
   cancel can kill the whole group through the SSH master;
3. forwards the harness's stdout line by line (one writer: lines never
   interleave), adds a ``batch`` line holding the batch document after the
   ``result`` event (saves a round trip), and writes a heartbeat line every
   second: when the SSH channel is gone, the write fails and the wrapper kills
   the harness group. SIGTERM/SIGHUP do the same.

Messages meant for the user go to stderr prefixed ``trainium-lens-remote:``.

``--command`` (``trainium-lens run --host``): the spec line is ``{argv, cwd, env,
run_spec}``; the user's command runs in a new session with the harness injected
(``PYTHONPATH`` = the boot folder, ``TRAINIUM_LENS_RUN`` = the run spec), its
stdout the channel's own (it streams untouched), its stderr relayed line by line
with the events of ``<run_dir>/events.jsonl`` between them, each event a line
``EVENT_MARK`` + JSON. The lifeline and signals stop its group as above; the
wrapper's exit status is the command's.
"""

import fcntl
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import warnings

# The harness's sweep of its descendants (the lens folder beside this file holds it).
if not __package__:  # run as a script on the host
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from trainium_lens.harness.nodes.slurm_end import end_events  # noqa: E402
from trainium_lens.harness.reaper import kill_descendants, scancel_jobs  # noqa: E402

HEARTBEAT_S = 1.0
# After the result, the harness's time to exit before it is killed (as the
# local target does: stream.TEARDOWN_GRACE_S); it holds the lock until then.
TEARDOWN_S = 1.0
# A lock held for less than this is the previous run's teardown: no message.
QUIET_WAIT_S = 1.5
MARK = "trainium-lens-remote: "
EXIT_BUSY = 75
# ``--command`` under srun: the SLURM jobs its armed tasks named (``hello``'s
# ``slurm_job``), scancelled whenever the command's group is stopped.
SLURM_JOBS: set = set()


class Channel:
    """Our stdout (the SSH channel): one writer, and it notices when it is gone.
    ``--command`` sends its events on stderr instead, each line after ``prefix``
    (stdout is the command's own)."""

    def __init__(self, out=None, prefix=b""):
        self.out = out if out is not None else sys.stdout.buffer
        self.prefix = prefix
        self.lock = threading.Lock()
        self.gone = threading.Event()

    def send(self, data):
        if self.gone.is_set():
            return
        with self.lock:
            try:
                self.out.write(data)
                self.out.flush()
            except (OSError, ValueError):
                self.gone.set()

    def event(self, **fields):
        self.send(self.prefix + (json.dumps(fields) + "\n").encode("utf-8"))


def kill_group(pgid, grace=2.0):
    scancel_jobs(SLURM_JOBS)  # the tasks on other nodes are no process of this group
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if sig == signal.SIGKILL:  # the harness outlived its grace: sweep what it started
            kill_descendants(pgid)
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            return
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            try:
                os.killpg(pgid, 0)
            except (ProcessLookupError, PermissionError):
                return
            time.sleep(0.02)


def take_lock(work_dir, wait_s, chan):
    fd = os.open(os.path.join(work_dir, "lock"), os.O_RDWR | os.O_CREAT, 0o600)
    start = time.monotonic()
    announced = False
    last_beat = 0.0
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            pass
        waited = time.monotonic() - start
        if not announced and waited > min(QUIET_WAIT_S, wait_s):
            chan.event(
                event="stage",
                stage="queue",
                message=f"another run is using this host's work dir: waiting (up to {wait_s:.0f} s)",
            )
            announced = True
        if waited > wait_s:
            sys.stderr.write(
                MARK + f"another run kept this host's work dir busy for {wait_s:.0f} s: "
                "try again when it ends\n"
            )
            sys.exit(EXIT_BUSY)
        if time.monotonic() - last_beat > HEARTBEAT_S:
            chan.event(event="heartbeat")
            last_beat = time.monotonic()
        if chan.gone.is_set():
            sys.exit(1)
        time.sleep(0.1)


def send_batch(chan, line, harness_s):
    """Right after the ``result`` event (the client stops listening soon after it:
    torch's interpreter teardown is not worth waiting for), send the batch
    document it names, so the client need not fetch it in another round trip."""
    try:
        event = json.loads(line)
        if event.get("event") != "result":
            return False
        with open(event["path"], "rb") as handle:
            document = json.load(handle)
    except (ValueError, KeyError, TypeError, OSError):
        return False  # the client reads the file itself
    chan.event(event="batch", path=event["path"], document=document, harness_s=round(harness_s, 4))
    return not chan.gone.is_set()


def detach(chan, proc, pgid, lock_fd):
    """All is said: end the SSH session now instead of after torch's interpreter
    teardown (seconds). The wrapper exits (closing the channel); a forked reaper,
    holding nothing of the channel, gives the harness TEARDOWN_S to exit and then
    kills its group, so still nothing is left behind."""
    with chan.lock:  # no other thread writes while we fork
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        if os.fork() != 0:
            os._exit(0)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    for fd in (proc.stdout.fileno(), proc.stderr.fileno(), lock_fd):
        try:
            os.close(fd)
        except OSError:
            pass
    deadline = time.monotonic() + TEARDOWN_S
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            os._exit(0)
        time.sleep(0.05)
    kill_group(pgid)
    os._exit(0)


def watch_lifeline(harness):
    """The client's end of file on our stdin: stop the harness group (once it
    exists) and end, without waiting for the heartbeat to notice."""
    # os.read, not sys.stdin: a daemon thread blocked inside the buffered
    # reader would abort the interpreter at exit (it holds the reader's lock).
    try:
        while os.read(0, 65536):
            pass
    except OSError:
        pass
    pgid = harness.get("pgid")
    if pgid:
        kill_group(pgid)
    os._exit(1)


def describe_signal(code):
    """The line the client shows for a harness ended by a signal (as a local
    run says it: targets/stream.describe_exit)."""
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = f"signal {-code}"
    hint = " (out of memory?)" if -code == signal.SIGKILL else ""
    return f"the harness ended without a result: killed by {name}{hint}"


EVENT_MARK = "\x1etrainium-lens-event: "


# srun's own words on its job (before any task runs: a pending allocation), and on
# a step it saw end under it (it may still exit 0: slurm_end.end_events).
_SRUN_JOB = re.compile(rb"^srun: (?:job|Job allocation|Granted job allocation) (\d+)")
_SRUN_ABORTED = (b"srun: Job step aborted", b"srun: error: Timed out waiting for job step")
SRUN_SAID = {"aborted": False}


def _note_srun_job(line):
    found = _SRUN_JOB.match(line)
    if found:
        SLURM_JOBS.add(found.group(1).decode())
    if line.startswith(_SRUN_ABORTED):
        SRUN_SAID["aborted"] = True


def _note_slurm_job(line):
    if b'"slurm_job"' not in line:
        return
    try:
        job = json.loads(line).get("slurm_job")
    except (ValueError, AttributeError):
        return
    if isinstance(job, str) and job.isdigit():
        SLURM_JOBS.add(job)


def run_command(work_dir, spec, lifeline, wait_s):
    """The user's command, armed; see the module's ``--command``. It takes the work
    dir's lock as a profile does (one run at a time on a host's work dir: the
    measurements of two would disturb each other), queueing up to ``wait_s``."""
    harness: dict = {}
    if lifeline:
        threading.Thread(target=watch_lifeline, args=(harness,), daemon=True).start()
    chan = Channel(sys.stderr.buffer, EVENT_MARK.encode())
    lock_fd = take_lock(work_dir, wait_s, chan)
    run_spec = spec["run_spec"]
    run_dir = run_spec["run_dir"]
    os.makedirs(run_dir, exist_ok=True)
    spec_path = os.path.join(run_dir, "run-spec.json")
    with open(spec_path, "w") as handle:
        json.dump(run_spec, handle)
    lens = os.path.join(work_dir, "lens")
    boot = os.path.join(lens, "trainium_lens", "harness", "script", "boot")
    env = dict(os.environ)
    env.update(spec.get("env") or {})
    env["PYTHONPATH"] = os.pathsep.join(p for p in (boot, lens, env.get("PYTHONPATH", "")) if p)
    env["TRAINIUM_LENS_RUN"] = spec_path
    events_path = os.path.join(run_dir, "events.jsonl")
    # The command runs under its owner (harness/script/owner.py), a subreaper: what it
    # starts ends when it exits, so its stderr ends then too, and nothing is left on
    # the host. The owner holds the lock until then; the pipe is its lifeline.
    lifeline, held = os.pipe()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-S", "-m", "trainium_lens.harness.script.owner", "--lifeline", str(lifeline)]
            + ["--"]
            + list(spec["argv"]),
            stdin=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            cwd=spec["cwd"],
            env=env,
            start_new_session=True,
            pass_fds=(lock_fd, lifeline),
        )
    except OSError as exc:
        sys.stderr.write(MARK + "cannot start " + spec["argv"][0] + ": " + str(exc.strerror or exc) + "\n")
        return 127
    finally:
        os.close(lifeline)
    harness["lifeline"] = held  # open until we end, however we end
    pgid = harness["pgid"] = proc.pid

    def stop(*_args):
        kill_group(pgid)
        os._exit(143)

    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, stop)

    def say(data):
        chan.send(data)
        if chan.gone.is_set():
            kill_group(pgid)  # the channel is gone
            os._exit(1)

    say(
        (
            EVENT_MARK + json.dumps({"event": "remote_process", "pgid": pgid, "wrapper": os.getpid()}) + "\n"
        ).encode()
    )
    done = threading.Event()

    def events():
        offset, partial = 0, b""
        while True:
            last = done.is_set()
            try:
                with open(events_path, "rb") as handle:
                    handle.seek(offset)
                    data = handle.read()
            except FileNotFoundError:
                data = b""
            offset += len(data)
            lines = (partial + data).split(b"\n")
            partial = lines.pop()
            for line in lines:
                if line.strip():
                    _note_slurm_job(line)
                    say(EVENT_MARK.encode() + line + b"\n")
            if last:
                return
            time.sleep(0.05)

    tail = threading.Thread(target=events, daemon=True)
    tail.start()
    assert proc.stderr is not None
    for line in iter(proc.stderr.readline, b""):
        _note_srun_job(line)
        say(line)
    code = proc.wait()
    done.set()
    tail.join(timeout=5)
    if SLURM_JOBS:  # under srun: did SLURM end the job (scancel, a node lost)?
        for event in end_events(SLURM_JOBS, failed=code != 0 or SRUN_SAID["aborted"]):
            say((EVENT_MARK + json.dumps(event) + "\n").encode())
    try:
        os.killpg(pgid, signal.SIGKILL)  # what the command left in its group
    except (ProcessLookupError, PermissionError):
        pass
    return code if code >= 0 else 128 - code


def main():
    # detach() forks with threads alive (3.12+ warns); the child only calls
    # os-level functions, which is safe.
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    work_dir, wait_s = sys.argv[1], float(sys.argv[2])
    lifeline = "--lifeline" in sys.argv[3:]
    chan = Channel()
    spec_line = sys.stdin.buffer.readline()
    try:
        spec = json.loads(spec_line)
    except ValueError:
        sys.stderr.write(MARK + "no job spec on stdin\n")
        return 2
    if "--command" in sys.argv[3:]:
        return run_command(work_dir, spec, lifeline, wait_s)
    harness: dict = {}  # "pgid" once the harness runs
    if lifeline:
        threading.Thread(target=watch_lifeline, args=(harness,), daemon=True).start()
    lock_fd = take_lock(work_dir, wait_s, chan)
    run_dir = spec["run_dir"]
    os.makedirs(run_dir, exist_ok=True)
    env = dict(os.environ)
    env.pop("TRAINIUM_LENS_LIFELINE", None)  # the harness's stdin here is ours, closed after the spec
    lens = os.path.join(work_dir, "lens")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (lens, env.get("PYTHONPATH", "")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "trainium_lens.harness"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=spec["workspace_root"],
        env=env,
        start_new_session=True,
        pass_fds=(lock_fd,),
    )
    pgid = harness["pgid"] = proc.pid
    with open(os.path.join(run_dir, "harness.pgid"), "w") as handle:
        handle.write(f"{pgid}\n")
    chan.event(event="remote_process", pgid=pgid, wrapper=os.getpid())

    def stop(*_args):
        kill_group(pgid)
        os._exit(143)

    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, stop)

    # Popen(stdin/stdout/stderr=PIPE): the three pipes exist.
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    stdout, stderr = proc.stdout, proc.stderr
    proc.stdin.write(spec_line)
    proc.stdin.close()

    def heartbeat():
        while proc.poll() is None:
            chan.event(event="heartbeat")
            if chan.gone.is_set():
                kill_group(pgid)
                os._exit(1)
            time.sleep(HEARTBEAT_S)

    def errors():
        for line in iter(stderr.readline, b""):
            with chan.lock:  # never inside a half-written stdout line's flush
                try:
                    sys.stderr.buffer.write(line)
                    sys.stderr.buffer.flush()
                except (OSError, ValueError):
                    pass

    threading.Thread(target=heartbeat, daemon=True).start()
    relay = threading.Thread(target=errors, daemon=True)
    relay.start()
    for line in iter(stdout.readline, b""):
        chan.send(line if line.endswith(b"\n") else line + b"\n")
        if b'"result"' in line and send_batch(chan, line, time.monotonic() - started):
            detach(chan, proc, pgid, lock_fd)
    code = proc.wait()
    try:
        os.killpg(pgid, signal.SIGKILL)  # anything the harness left in its group
    except (ProcessLookupError, PermissionError):
        pass
    relay.join(timeout=2)  # its last words first: ours must be the last line
    if code < 0:  # killed (the OOM killer, a user's kill -9): say so, not its last log line
        sys.stderr.write(MARK + describe_signal(code) + "\n")
        sys.stderr.flush()
        return 128 - code
    return code


if __name__ == "__main__":
    sys.exit(main())

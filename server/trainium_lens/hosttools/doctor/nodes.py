"""``doctor --hosts h1,h2`` / ``doctor --slurm LOGIN``: can these nodes run one
job together (docs/nodes.md)?

Every host gets the one-host report (``run_doctor``, in parallel); then the
checks that only make sense across nodes, in a report of their own:

* ``same_stack``: the same Python and torch version on every node (ranks of
  different torch builds may not even agree on a collective's wire format);
* ``same_code``: the same harness on every node, when one is installed (its
  content hash in the node's work dir);
* ``clocks``: every node's clock against this machine's, within
  ``CLOCK_BOUND_S`` given the probe's round trip (per-line figures do not
  depend on it; start times compared across nodes do);
* ``ports``: the first node listens on a port of the rendezvous range on its
  cluster address and every other node connects to it there.

Under SLURM the login host is checked as one host, plus ``sinfo``: the
allocation's nodes are reachable only through a job.
"""

from __future__ import annotations

import concurrent.futures
import random
import shlex

from trainium_lens.errors import LensError
from trainium_lens.hosttools.doctor.report import Report, add
from trainium_lens.hosttools.doctor.run import run_doctor
from trainium_lens.targets.make import make_target
from trainium_lens.targets.nodes.hosts import PORT_RANGE, HostsTarget
from trainium_lens.targets.ssh.target import SshTarget
from trainium_lens.targets.where import Where

#: Clocks further apart than this (after the probe's round trip) are reported.
CLOCK_BOUND_S = 0.1

# $1 python, $2 address, $3 port: listen once (10 s at most) on that address.
_LISTEN = (
    'exec "$1" -c \'import socket,sys; s=socket.socket(); s.settimeout(10); '
    's.bind((sys.argv[1], int(sys.argv[2]))); s.listen(1); print("listening", flush=True); '
    's.accept()\' "$2" "$3"'
)
# $1 python, $2 address, $3 port.
_CONNECT = (
    "exec \"$1\" -c 'import socket,sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), 5)' "
    '"$2" "$3"'
)


def doctor_hosts(where: Where) -> list[Report]:
    """One report per host of ``where.hosts``, then the cross-node report (host ``nodes``)."""
    hosts = list(where.hosts)
    with concurrent.futures.ThreadPoolExecutor(len(hosts)) as pool:
        reports = list(pool.map(lambda h: run_doctor(where.at(h)), hosts))
    across = Report(host=",".join(hosts))
    reached = [r for r in reports if (r.get("ssh") or _none).status == "pass"]
    add(
        across,
        "nodes_reachable",
        "pass" if len(reached) == len(hosts) else "fail",
        f"{len(reached)} of {len(hosts)} answered over SSH",
        None if len(reached) == len(hosts) else "see the failing host's report above",
    )
    stacks = {r.host: (_detail(r, "python").split(" at ")[0], _detail(r, "torch")) for r in reports}
    if len(set(stacks.values())) == 1:
        python, torch = next(iter(stacks.values()))
        add(across, "same_stack", "pass", f"{python}, {torch} on every node")
    else:
        listed = "; ".join(f"{h}: {p}, {t}" for h, (p, t) in stacks.items())
        add(across, "same_stack", "fail", listed, "install the same Python and torch on every node")
    target = make_target(where)
    assert isinstance(target, HostsTarget)
    try:
        _cross_checks(across, target, where.remote_python or "python3")
    finally:
        target.close()
    return [*reports, across]


class _NoCheck:
    status = "skip"
    detail = ""


_none = _NoCheck()


def _detail(report: Report, name: str) -> str:
    check = report.get(name)
    return check.detail if check is not None and check.status == "pass" else "?"


def _cross_checks(across: Report, target: HostsTarget, python: str) -> None:
    try:
        info = target.probe()
    except LensError as exc:
        add(across, "clocks", "skip", f"cannot probe the nodes: {exc}")
        add(across, "ports", "skip", "needs every node")
        return
    worst = max(info, key=lambda i: abs(i.offset_s) - i.uncertainty_s)
    listed = ", ".join(f"{i.host} {i.offset_s * 1000:+.1f} ± {i.uncertainty_s * 1000:.1f} ms" for i in info)
    off = abs(worst.offset_s) - worst.uncertainty_s > CLOCK_BOUND_S
    add(
        across,
        "clocks",
        "warn" if off else "pass",
        f"against this machine: {listed} (bound {CLOCK_BOUND_S * 1000:.0f} ms)",
        "run chrony/NTP on every node (start times across nodes are compared on the timeline)"
        if off
        else None,
    )
    hashes = _harness_hashes(target)
    if hashes and len(set(hashes.values())) > 1:
        listed = ", ".join(f"{h}: {v or 'none'}" for h, v in hashes.items())
        add(
            across,
            "same_code",
            "warn",
            f"harness differs: {listed}",
            "the next profile run installs the same one",
        )
    else:
        add(across, "same_code", "pass", "the same harness (or none yet: the run installs it) on every node")
    _ports(across, target, info, python)


def _harness_hashes(target: HostsTarget) -> dict[str, str]:
    out = {}
    for node in target.nodes:
        try:
            proc = node.conn.run(
                'cat "$HOME"/.cache/trainium-lens/*/node-"$1"/lens/.hash 2>/dev/null | sort -u | head -n1',
                [node.host],
                timeout=20,
            )
            out[node.host] = proc.stdout.decode("utf-8", "replace").strip()
        except LensError:
            out[node.host] = ""
    return out


def _ports(across: Report, target: HostsTarget, info: list, python: str) -> None:
    first, addr = target.nodes[0], info[0].addr
    port = random.randint(*PORT_RANGE)
    import subprocess

    listener = subprocess.Popen(
        first.conn.argv(_LISTEN, [python, addr, str(port)]),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert listener.stdout is not None
        ready = listener.stdout.readline().decode().strip() == "listening"
        if not ready:
            err = (listener.stderr.read() if listener.stderr else b"").decode("utf-8", "replace").strip()
            add(
                across,
                "ports",
                "fail",
                f"{first.host} cannot listen on {addr}:{port}: {err.splitlines()[-1] if err else '?'}",
                "free the rendezvous port range on the first node",
            )
            return
        failed = []
        for node in target.nodes[1:] or target.nodes[:1]:
            proc = node.conn.run(_CONNECT, [python, addr, str(port)], timeout=20)
            if proc.returncode != 0:
                failed.append(node.host)
        if failed:
            add(
                across,
                "ports",
                "fail",
                f"{', '.join(failed)} cannot reach {first.host} at {addr}:{port}",
                f"open TCP ports {PORT_RANGE[0]}-{PORT_RANGE[1]} between the nodes (or pass --ifname)",
            )
        else:
            add(across, "ports", "pass", f"every node reaches {first.host} at {addr}:{port} (the rendezvous)")
    finally:
        listener.kill()
        listener.wait()


def doctor_slurm(where: Where) -> list[Report]:
    """The login host's report (``where.slurm``), plus SLURM's view of its nodes."""
    login = where.slurm or ""
    report = run_doctor(where.at(login))
    slurm = Report(host=f"{login} (slurm)")
    node = make_target(where.at(login))
    assert isinstance(node, SshTarget)
    try:
        proc = node.conn.run(
            "for c in srun squeue scancel sinfo; do command -v $c >/dev/null || echo missing=$c; done; "
            "sinfo -h -N -o '%N %T' 2>&1",
            timeout=30,
        )
        text = proc.stdout.decode("utf-8", "replace")
        missing = [ln.split("=", 1)[1] for ln in text.splitlines() if ln.startswith("missing=")]
        states = [ln for ln in text.splitlines() if ln and not ln.startswith("missing=")]
        if missing:
            add(
                slurm,
                "slurm",
                "fail",
                f"not on the login host: {' '.join(missing)}",
                "use the cluster's login node",
            )
        else:
            usable = [s for s in states if s.split()[-1].rstrip("*") in ("idle", "mixed", "allocated")]
            add(
                slurm,
                "slurm",
                "pass" if usable else "warn",
                f"srun, squeue, scancel, sinfo; nodes: {', '.join(states) or 'none'}",
                None if usable else "no node can take a job now",
            )
    except LensError as exc:
        add(slurm, "slurm", "skip", f"needs the login host: {shlex.quote(str(exc))}")
    finally:
        node.close()
    return [report, slurm]

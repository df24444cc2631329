"""``trainium-lens export``: a real CPU profile of examples/rmsnorm.py, exported as
Chrome-trace JSON that Perfetto UI opens, with the user-line ranges in a lane."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, ROOT
from trainium_lens.harness.labels import parse_label
from trainium_lens.model.job import workspace_id
from trainium_lens.model.result import load
from trainium_lens.model.store import RunStore
from trainium_lens.traces.chrome import parse_trace
from trainium_lens.traces.export import to_chrome_trace


def cli(
    *args: str, cwd: Path | None = None, env: dict | None = None, timeout: float = 240
) -> subprocess.CompletedProcess:
    environ = dict(os.environ, PYTHONPATH=str(ROOT / "server"), PYTHONIOENCODING="utf-8")
    environ.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "trainium_lens", *args],
        cwd=cwd,
        env=environ,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """One real CPU profile of rms_norm_naive, stored in a copy of the example."""
    ws = tmp_path_factory.mktemp("ws")
    (ws / "examples").mkdir()
    shutil.copy(EXAMPLES / "rmsnorm.py", ws / "examples" / "rmsnorm.py")
    env = {"TRAINIUM_LENS_CACHE": str(tmp_path_factory.mktemp("cache"))}
    out = ws / "naive.json"
    proc = cli(
        "profile",
        str(ws / "examples" / "rmsnorm.py"),
        "rms_norm_naive",
        "--workspace",
        str(ws),
        "--active",
        "3",
        "--timing-calls",
        "3",
        "--json",
        str(out),
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    return ws, load(out)


def check_chrome_trace(doc: dict) -> dict[tuple, str]:
    """What Perfetto's JSON importer needs; returns the lane names by (pid, tid)."""
    assert isinstance(doc, dict) and isinstance(doc["traceEvents"], list)
    assert doc["displayTimeUnit"] in ("ms", "ns")
    names: dict[tuple, str] = {}
    processes = set()
    by_track: dict[tuple, list[tuple[float, float]]] = defaultdict(list)
    for e in doc["traceEvents"]:
        assert e["ph"] in ("X", "M"), e
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int)
        if e["ph"] == "M":
            assert e["name"] in ("process_name", "process_sort_index", "thread_name", "thread_sort_index")
            if e["name"] == "thread_name":
                names[(e["pid"], e["tid"])] = e["args"]["name"]
            if e["name"] == "process_name":
                processes.add(e["pid"])
            continue
        assert isinstance(e["name"], str) and e["name"]
        assert isinstance(e["ts"], (int, float)) and isinstance(e["dur"], (int, float))
        assert e["dur"] >= 0
        assert (e["pid"], e["tid"]) in names, f"unnamed lane for {e}"
        by_track[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"]))
    assert {pid for pid, _ in names} <= processes
    # Complete events on one track must nest or be disjoint (else Perfetto drops them).
    for spans in by_track.values():
        open_ends: list[float] = []
        for start, end in sorted(spans, key=lambda s: (s[0], -s[1])):
            while open_ends and open_ends[-1] <= start + 1e-3:
                open_ends.pop()
            assert not open_ends or end <= open_ends[-1] + 1e-3, (start, end, open_ends[-1])
            open_ends.append(end)
    return names


def test_export_of_a_real_profile_opens_as_chrome_trace_with_the_line_ranges(run, tmp_path):
    ws, result = run
    dest = tmp_path / "out" / "naive.perfetto.json"
    proc = cli("export", result.run_id, "-o", str(dest), "--workspace", str(ws))
    assert proc.returncode == 0, proc.stderr
    assert f"wrote {dest}" in proc.stdout and "User lines:" in proc.stdout
    doc = json.loads(dest.read_text())
    names = check_chrome_trace(doc)
    lanes = {v: k for k, v in names.items()}
    assert {"User lines", "ATen ops", "Steps"} <= set(lanes)
    assert doc["otherData"]["run_id"] == result.run_id

    events = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    ranges = [e for e in events if (e["pid"], e["tid"]) == lanes["User lines"]]
    # Every profiled line has its ranges, named as Neuron Explorer links them.
    profiled = {(s.file, s.line) for s in result.lines}
    assert profiled and len(profiled) == 4
    parsed = [(e, parse_label(e["name"])) for e in ranges]
    assert all(p is not None for _e, p in parsed)
    seen = {p[:2] for _e, p in parsed if p}
    assert seen == profiled
    assert all(p and e["args"]["source"] == "{}:{}".format(*p[:2]) for e, p in parsed)
    # The result's timeline windows point at those ranges, in the same clock.
    starts = sorted(e["ts"] for e in ranges)
    for lw in result.timeline:
        for w in lw.windows:
            assert any(abs(s - w.start_us) < 0.01 for s in starts), (lw.line, w)
    # Every ATen op carries the line it is attributed to, the unlabelled CPU twin
    # steps (whose times the result reports) included: line 22 is `x2 = x * x`.
    ops = [e for e in events if (e["pid"], e["tid"]) == lanes["ATen ops"]]
    aten = [e for e in ops if e["name"].startswith("aten::")]
    assert aten and all("source" in e["args"] for e in aten)
    mul_on_22 = [
        e for e in ops if e["name"] == "aten::mul" and e["args"].get("source") == "examples/rmsnorm.py:22"
    ]
    # labelled + plain twin of every measured step, each of calls_per_step calls
    measured = result.stability.steps_measured * result.totals.calls_per_step
    assert len(mul_on_22) == 2 * measured
    rsqrt = [e for e in ops if e["name"] == "aten::rsqrt"]
    assert {e["args"]["source"] for e in rsqrt} == {"examples/rmsnorm.py:24"}
    assert len(rsqrt) == 2 * measured
    # The labelled steps' ops began inside a range of their line; the twins' outside any.
    by_line = defaultdict(list)
    for e in ranges:
        by_line[e["args"]["source"]].append((e["ts"], e["ts"] + e["dur"]))
    inside = [e for e in aten if any(a <= e["ts"] <= b for a, b in by_line[e["args"]["source"]])]
    assert len(inside) * 2 == len(aten)


def test_export_fetches_a_trace_that_is_still_on_the_ssh_host(run, sshd, ssh_control_dir, tmp_path):
    ws, result = run
    # The same run as if it had been made on the host: its trace is only there.
    store_ws = tmp_path / "ws"
    store_ws.mkdir()
    # in the host's default work dir for this workspace: only its run folders are fetched
    remote_dir = sshd.home / ".cache" / "trainium-lens" / workspace_id(store_ws) / "runs" / "remote-batch"
    remote_dir.mkdir(parents=True)
    remote_trace = remote_dir / Path(result.artifacts.trace).name
    shutil.copy(result.artifacts.trace, remote_trace)
    moved = load(ws / "naive.json")
    moved.run_id = "remote-batch-0"
    moved.artifacts.location = "lens-test"
    moved.artifacts.run_dir = str(remote_dir)
    moved.artifacts.trace = str(remote_trace)
    RunStore(store_ws).save(moved)
    dest = tmp_path / "remote.json"
    proc = cli(
        "export",
        "remote-batch",
        "-o",
        str(dest),
        "--workspace",
        str(store_ws),
        "--ssh-config",
        str(sshd.config),
    )
    assert proc.returncode == 0, proc.stderr
    cached = store_ws / ".trainium-lens" / "artifacts" / "remote-batch-0" / remote_trace.name
    assert cached.read_bytes() == remote_trace.read_bytes()
    assert check_chrome_trace(json.loads(dest.read_text()))
    remote_trace.unlink()  # the second export reads the local copy
    proc = cli(
        "export",
        "remote-batch",
        "-o",
        str(dest),
        "--workspace",
        str(store_ws),
        "--ssh-config",
        str(sshd.config),
    )
    assert proc.returncode == 0, proc.stderr


def test_a_broken_or_missing_trace_is_one_clear_line(run, tmp_path):
    ws, result = run
    broken = load(ws / "naive.json")
    broken.run_id = "broken-0"
    other = tmp_path / "ws"  # not the shared workspace: later tests read its latest run
    other.mkdir()
    # where a local run of `other` keeps its trace: <cache>/<workspace id>/runs/<batch>/
    folder = tmp_path / "cache" / workspace_id(other) / "runs" / "broken"
    folder.mkdir(parents=True)
    bad = folder / "bad.trace.json"
    bad.write_text('{"traceEvents": [')
    broken.artifacts.trace = str(bad)
    RunStore(other).save(broken)
    proc = cli("export", "broken-0", "-o", str(tmp_path / "x.json"), "--workspace", str(other))
    assert proc.returncode != 0
    assert proc.stderr.strip().count("\n") == 0
    assert "not valid JSON" in proc.stderr and str(bad) in proc.stderr
    assert not (tmp_path / "x.json").exists()
    bad.unlink()
    proc = cli("export", "broken-0", "-o", str(tmp_path / "x.json"), "--workspace", str(other))
    assert "the trace of run broken-0 is gone" in proc.stderr
    # A trace outside this workspace's run folders is never read.
    elsewhere = tmp_path / "elsewhere.trace.json"
    elsewhere.write_text('{"traceEvents": []}')
    broken.artifacts.trace = str(elsewhere)
    RunStore(other).save(broken)
    proc = cli("export", "broken-0", "-o", str(tmp_path / "x.json"), "--workspace", str(other))
    assert proc.returncode != 0 and "outside this workspace's run folders" in proc.stderr
    assert not (tmp_path / "x.json").exists()


def test_device_events_get_their_lane_and_the_line_that_launched_them():
    """A trace shaped like torch's CUDA traces (kernels on a GPU pid, linked to
    their op by External id): no GPU here, so this one is written by hand."""
    trace = {
        "traceEvents": [
            {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "GPU 0"}},
            {"ph": "X", "cat": "cpu_op", "name": "a.py(3): f", "pid": 9, "tid": 9, "ts": 100, "dur": 50},
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": "aten::mul",
                "pid": 9,
                "tid": 9,
                "ts": 110,
                "dur": 20,
                "args": {"External id": 7},
            },
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaLaunchKernel",
                "pid": 9,
                "tid": 9,
                "ts": 115,
                "dur": 5,
                "args": {"External id": 7, "correlation": 70},
            },
            {
                "ph": "X",
                "cat": "kernel",
                "name": "mul_kernel",
                "pid": 0,
                "tid": 7,
                "ts": 140,
                "dur": 30,
                "args": {"External id": 7, "correlation": 70},
            },
            {
                "ph": "X",
                "cat": "python_function",
                "name": "a.py(1): f",
                "pid": 9,
                "tid": 9,
                "ts": 90,
                "dur": 80,
            },
        ]
    }
    t = parse_trace(trace)
    kinds = [lane.kind for lane in t.lanes]
    assert kinds == ["lines", "ops", "python", "runtime", "device"]
    assert t.lanes[-1].name == "GPU 0 · stream 7"
    by_name = {e.name: e for e in t.events}
    assert by_name["mul_kernel"].line == ("a.py", 3)
    assert by_name["aten::mul"].line == ("a.py", 3)
    assert by_name["a.py(1): f"].line is None  # a Python frame is not a line range
    doc = to_chrome_trace(t)
    assert {e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "process_name"} == {
        "Trainium Lens run",
        "Device",
    }


async def test_timeline_request_gives_the_lines_events_and_where_they_are_now(run):
    """The language server's trainiumLens/timeline on the real run: compact columns,
    the hot line's events marked, and each source mapped to the editor's line."""
    from tests.support.lsp_client import open_doc, request, start, stop

    ws, result = run
    path = ws / "examples" / "rmsnorm.py"
    client = await start(ws)
    try:
        uri = open_doc(client, path)
        data = await request(client, "trainiumLens/timeline", {"uri": uri, "line": 21})
        assert "error" not in data, data
        ev = data["events"]
        n = len(ev["start"])
        assert n > 50 and all(len(ev[k]) == n for k in ("lane", "depth", "dur", "name", "src"))
        assert data["sources"][data["focusSrc"]] == ["examples/rmsnorm.py", 22]
        assert data["targets"][data["focusSrc"]] == {"uri": uri, "line": 21}
        lanes = [lane["name"] for lane in data["lanes"]]
        assert lanes[:1] == ["User lines"] and "ATen ops" in lanes
        focused = [i for i in range(n) if ev["src"][i] == data["focusSrc"]]
        names = {data["names"][ev["name"][i]] for i in focused}
        assert names == {"examples/rmsnorm.py(22): rms_norm_naive", "aten::mul"}
        # one range + one mul per labelled call, one mul per plain twin call
        measured = result.stability.steps_measured * result.totals.calls_per_step
        assert len(focused) == 3 * measured
        assert set(ev["phase"]) == {0}  # a forward-only function: no backward events
        f = data["focus"]
        assert min(ev["start"][i] for i in focused) == f["start"] and f["end"] > f["start"]
        assert min(ev["start"]) == 0.0

        # The file is edited above the line: the run's line 22 now sits one lower.
        from tests.support.lsp_client import change

        change(client, uri, 2, (0, 0), (0, 0), "# a new first line\n")
        moved = await request(client, "trainiumLens/timeline", {"uri": uri, "line": 22})
        assert moved["sources"][moved["focusSrc"]] == ["examples/rmsnorm.py", 22]
        assert moved["targets"][moved["focusSrc"]] == {"uri": uri, "line": 22}
        # A line that was not profiled: the whole run, nothing focused.
        plain = await request(client, "trainiumLens/timeline", {"uri": uri, "line": 0})
        assert plain["focusSrc"] == -1 and plain["focus"] is None
        assert len(plain["events"]["start"]) == n
    finally:
        await stop(client)


async def test_timeline_request_without_a_run_is_one_clear_line(tmp_path):
    from tests.support.lsp_client import open_doc, request, start, stop

    (tmp_path / "a.py").write_text("x = 1\n")
    client = await start(tmp_path)
    try:
        uri = open_doc(client, tmp_path / "a.py")
        data = await request(client, "trainiumLens/timeline", {"uri": uri, "line": 0})
        assert data == {"error": "no profile run for this file yet: run Profile on Trainium first"}
    finally:
        await stop(client)


def test_a_device_event_the_harness_tagged_takes_its_tag():
    """The xla harness tags each executed HLO instruction (a device event, no
    launching op) with its line, the same ``Source line`` tag as torch's ops."""
    trace = {
        "traceEvents": [
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": "a.py(4): f",
                "pid": 1,
                "tid": 1,
                "ts": 100,
                "dur": 10,
            },
            {
                "ph": "X",
                "cat": "device",
                "name": "fusion.1",
                "pid": 2,
                "tid": 1,
                "ts": 100,
                "dur": 10,
                "args": {"hlo_op": "fusion.1", "Source line": "a.py:4"},
            },
            {
                "ph": "X",
                "cat": "device",
                "name": "copy.2",
                "pid": 2,
                "tid": 1,
                "ts": 120,
                "dur": 5,
                "args": {"hlo_op": "copy.2"},
            },
        ]
    }
    by_name = {e.name: e for e in parse_trace(trace).events}
    assert by_name["fusion.1"].line == ("a.py", 4)
    assert by_name["copy.2"].line is None

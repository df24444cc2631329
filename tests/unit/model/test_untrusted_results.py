"""Stored results are untrusted data (a repository can commit one): what a
crafted or damaged result file can and cannot make the core do. Real files in a
real workspace, read through the real store; after each, nothing outside the
workspace has changed."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest

from trainium_lens.errors import LensError, UsageError
from trainium_lens.model.codec import ResultError
from trainium_lens.model.job import workspace_id
from trainium_lens.model.result import Result, load, save
from trainium_lens.model.store import RunStore
from trainium_lens.traces.artifacts import artifacts_cache, local_trace_path
from trainium_lens.traces.chrome import TraceError

SCHEMA1 = Path(__file__).resolve().parents[2] / "data" / "schema1_result.json"


def result(run_id: str = "20261129-101500-abcd-0", **artifacts) -> Result:
    data = json.loads(SCHEMA1.read_text())
    data["run_id"] = run_id
    data["batch_id"] = run_id.rsplit("-", 1)[0] if "/" not in run_id else "b"
    data["artifacts"] = {"location": "local", "run_dir": "", "trace": None, **artifacts}
    return Result.from_dict(data)


def snapshot(folder: Path) -> dict[str, bytes | str]:
    """Every file (content) and link (target) below ``folder``."""
    out: dict[str, bytes | str] = {}
    for path in sorted(folder.rglob("*")):
        key = str(path.relative_to(folder))
        if path.is_symlink():
            out[key] = "-> " + os.readlink(path)
        elif path.is_file():
            out[key] = path.read_bytes()
    return out


@pytest.fixture
def victim(tmp_path) -> Path:
    """A folder outside the workspace that a crafted result aims at."""
    folder = tmp_path / "victim"
    folder.mkdir()
    (folder / "id_ed25519").write_text("secret key\n")
    return folder


@pytest.fixture
def ws(tmp_path) -> Path:
    root = tmp_path / "repo" / "ws"
    root.mkdir(parents=True)
    return root


def write_raw(ws: Path, name: str, data: bytes) -> Path:
    runs = ws / ".trainium-lens" / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    (runs / name).write_bytes(data)
    return runs / name


@pytest.mark.parametrize("run_id", ["../../../victim", "/etc/passwd", "a/b", "..", ".hidden", "x" * 200, ""])
def test_a_run_id_that_is_not_a_plain_name_is_refused(ws, victim, run_id):
    data = json.loads(SCHEMA1.read_text())
    data["run_id"] = run_id
    path = write_raw(ws, "crafted.json", json.dumps(data).encode())
    with pytest.raises(ResultError, match="run_id"):
        load(path)
    store = RunStore(ws)
    assert store.load_all() == [] and [p.name for p, _ in store.skipped] == ["crafted.json"]
    with pytest.raises(UsageError):
        store.get(run_id or "../x")
    with pytest.raises(TraceError):
        artifacts_cache(ws, run_id)
    assert snapshot(victim) == {"id_ed25519": b"secret key\n"}


def test_get_refuses_paths_and_finds_by_prefix(ws):
    store = RunStore(ws)
    store.save(result())
    assert store.get("20261129-101500-ab").run_id == "20261129-101500-abcd-0"
    for bad in ("../runs/20261129-101500-abcd-0", str(store.runs / "20261129-101500-abcd-0"), "a b"):
        with pytest.raises(UsageError, match="not a run id"):
            store.get(bad)


@pytest.mark.parametrize(
    "name, data",
    [
        ("latin1.json", '{"run_id": "caf\xe9"}'.encode("latin-1")),
        ("nested.json", b"[" * 100_000 + b"]" * 100_000),
        (
            "deep-object.json",
            b'{"run_id": "x", "schema_version": 2, "a": ' + b"[" * 50_000 + b"]" * 50_000 + b"}",
        ),
        ("truncated.json", b'{"run_id": "x", "sche'),
        ("not-an-object.json", b"[1, 2, 3]"),
        ("empty.json", b""),
        ("binary.json", bytes(range(256))),
    ],
)
def test_any_damaged_file_is_skipped_and_named_once(ws, caplog, name, data):
    store = RunStore(ws)
    good = result()
    store.save(good)
    write_raw(ws, name, data)
    with caplog.at_level(logging.WARNING, logger="trainium_lens.model.store"):
        assert [r.run_id for r in store.load_all()] == [good.run_id]
        assert [r.run_id for r in store.load_all()] == [good.run_id]  # the editor reloads often
    assert [p.name for p, _ in store.skipped] == [name]
    named = [r for r in caplog.records if name in r.getMessage()]
    assert len(named) == 1, [r.getMessage() for r in caplog.records]
    with pytest.raises(LensError) as err:  # asked for by name: one line, no traceback
        store.get(name[:-5])
    assert "\n" not in str(err.value)
    store.save(result("20261129-101500-abcd-1"))  # a later save still works beside it


def test_a_full_disk_leaves_no_temporary_file(ws):
    """/dev/full is a real device whose writes fail with ENOSPC: a committed link to it
    at the old temporary name is not followed (the writer's temporary is its own), and
    the store's write into a full device fails leaving nothing."""
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full")
    target = ws / "r.json"
    (ws / ".r.json.tmp").symlink_to("/dev/full")
    save(result(), target)
    assert load(target).run_id == result().run_id and (ws / ".r.json.tmp").is_symlink()
    target.unlink()
    real_open = os.open

    def full(path, flags, mode=0o777, **kw):  # the temporary lands on a full device
        fd, device = real_open(path, flags, mode, **kw), real_open("/dev/full", os.O_WRONLY)
        os.dup2(device, fd)
        os.close(device)
        return fd

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("trainium_lens.model.files.os.open", full)
        with pytest.raises(OSError):
            save(result(), target)
    assert sorted(p.name for p in ws.iterdir()) == [".r.json.tmp"]
    assert not target.exists()


def test_a_committed_symlink_never_carries_a_write_out_of_the_workspace(ws, victim):
    (ws / ".trainium-lens").mkdir()
    (ws / ".trainium-lens" / "runs").symlink_to(victim)
    store = RunStore(ws)
    with pytest.raises(LensError, match="leads outside"):
        store.save(result())
    (ws / ".trainium-lens" / "runs").unlink()
    (ws / ".trainium-lens" / "artifacts").symlink_to(victim)
    remote = result(location="trn", trace="/home/u/runs/b/x.trace.json")
    store.save(remote)
    with pytest.raises(TraceError, match="outside"):
        local_trace_path(remote, ws, lambda host: pytest.fail("nothing may be fetched"))
    assert snapshot(victim) == {"id_ed25519": b"secret key\n"}


def test_a_local_trace_is_read_only_from_this_workspaces_run_folders(ws, tmp_path, victim):
    cache = tmp_path / "cache" / workspace_id(ws) / "runs" / "b"
    cache.mkdir(parents=True)
    (cache / "x.trace.json").write_text('{"traceEvents": []}')
    ok = result(trace=str(cache / "x.trace.json"))
    assert local_trace_path(ok, ws) == (cache / "x.trace.json").resolve()
    for trace in (str(victim / "id_ed25519"), str(cache / ".." / ".." / ".." / "x"), "/dev/zero"):
        with pytest.raises(TraceError, match="outside this workspace's run folders"):
            local_trace_path(result(trace=trace), ws)
    other = tmp_path / "cache" / workspace_id(tmp_path) / "runs" / "b"  # another workspace's run
    other.mkdir(parents=True)
    (other / "x.trace.json").write_text("{}")
    with pytest.raises(TraceError, match="outside"):
        local_trace_path(result(trace=str(other / "x.trace.json")), ws)


def test_a_remote_trace_lands_only_in_the_run_cache_and_never_replaces(ws, victim):
    fetched = []

    class Fetcher:
        def fetch(self, remote, dest, *, workspace):
            fetched.append((remote, Path(dest)))
            Path(dest).parent.mkdir(parents=True, exist_ok=True)
            Path(dest).write_text("{}")
            return dest

        def close(self):
            pass

    res = result(location="trn", trace="/home/u/runs/b/x.trace.json")
    path = local_trace_path(res, ws, lambda host: Fetcher())
    assert path == ws / ".trainium-lens" / "artifacts" / res.run_id / "x.trace.json"
    assert local_trace_path(res, ws, lambda host: pytest.fail("cached: no second fetch")) == path
    for trace in ("/home/u/..", "/home/u/runs/b/.."):
        with pytest.raises(TraceError, match="not a plain"):
            local_trace_path(result(location="trn", trace=trace), ws, lambda host: Fetcher())
    assert len(fetched) == 1
    assert snapshot(victim) == {"id_ed25519": b"secret key\n"}


def test_restricted_mode_reads_traces_already_here_and_reaches_no_host(ws):
    res = result(location="trn", trace="/home/u/runs/b/x.trace.json")
    with pytest.raises(TraceError, match="Restricted Mode"):
        local_trace_path(res, ws, lambda host: pytest.fail("no host in Restricted Mode"), remote=False)
    cached = artifacts_cache(ws, res.run_id) / "x.trace.json"
    cached.parent.mkdir(parents=True)
    cached.write_text("{}")
    assert local_trace_path(res, ws, lambda host: pytest.fail("no host"), remote=False) == cached


def test_pruning_takes_the_runs_fetched_artifacts_and_nothing_else(ws, victim):
    store = RunStore(ws, history=1)
    first = result("20261129-101500-aaaa-0")
    store.save(first)
    art = ws / ".trainium-lens" / "artifacts"
    for name in ("20261129-101500-aaaa", "keep-me"):  # `fetch`'s copy of the batch; another
        (art / name).mkdir(parents=True)
        (art / name / "f").write_text("x")
    (art / first.run_id).symlink_to(victim)  # a link is removed, never followed
    second = result("20261129-111500-bbbb-0")
    store.save(second)
    assert [r.run_id for r in store.load_all()] == [second.run_id]
    assert [r.run_id for r in store.take_pruned()] == [first.run_id] and store.take_pruned() == []
    assert sorted(p.name for p in art.iterdir()) == ["keep-me"]
    assert snapshot(victim) == {"id_ed25519": b"secret key\n"}


def test_control_characters_in_stored_strings_never_reach_the_terminal():
    from trainium_lens.cli.render.result import render_result

    res = result()
    res.lines[0].text = "x = 1  \x1b]0;owned\x07\x1b[2J"
    res.function.name = "f\x1b[31m"
    out = render_result(res)
    assert "\x1b" not in out and "\x07" not in out
    assert "x = 1  ?]0;owned??[2J" in out


@pytest.mark.parametrize("device", ["/dev/stdin", "/dev/zero", "fifo", "dir"])
def test_a_store_entry_that_is_not_a_regular_file_is_skipped_without_reading_it(ws, tmp_path, device):
    """Before: `runs/x.json -> /dev/stdin` blocked every reader of the store and
    `-> /dev/zero` was read until the OOM killer came."""
    store = RunStore(ws)
    good = result()
    store.save(good)
    entry = store.runs / "x.json"
    if device == "fifo":
        os.mkfifo(entry)  # nobody ever writes: an open that blocked would hang here
    elif device == "dir":
        entry.mkdir()
    else:
        entry.symlink_to(device)
    assert [r.run_id for r in RunStore(ws).load_all()] == [good.run_id]
    fresh = RunStore(ws)
    fresh.load_all()
    assert [(p.name, "not a regular file" in why or "link" in why) for p, why in fresh.skipped] == [
        ("x.json", True)
    ]
    with pytest.raises(LensError):
        fresh.get("x")


def test_a_result_from_the_future_is_skipped_and_a_new_run_is_kept_and_latest(ws):
    """Before: twenty committed results dated 9999 were `latest` for ever and every
    new run of the function was pruned the moment it was saved."""
    runs = ws / ".trainium-lens" / "runs"
    runs.mkdir(parents=True)
    for i in range(20):
        data = json.loads(result(f"99991231-000000-ffff-{i}").to_json())
        data["created_at"] = "9999-12-31T23:59:59+00:00"
        (runs / f"{data['run_id']}.json").write_text(json.dumps(data))
    store = RunStore(ws, history=20)
    fresh = result("20261129-101500-abcd-0")
    store.save(fresh)
    assert store.latest(fresh.function.file, fresh.function.name).run_id == fresh.run_id
    assert [r.run_id for r in store.load_all()] == [fresh.run_id]
    assert len(store.skipped) == 20 and all("future" in why for _, why in store.skipped)


def test_a_new_run_from_a_host_with_a_slow_clock_is_latest_and_never_pruned(ws):
    store = RunStore(ws, history=2)
    for i in range(2):
        store.save(result(f"20261129-10150{i}-abcd-0"))
    late = result("20200101-000000-abcd-0")
    late.created_at = "2020-01-01T00:00:00+00:00"  # the host's clock is years behind
    store.save(late)
    runs = store.history(late.function.file, late.function.name)
    assert [r.run_id for r in runs][-1] == late.run_id and len(runs) == 2


@pytest.mark.parametrize("when", ["yesterday", "", "2026-13-45T99:00:00Z", "1" * 30])
def test_created_at_must_be_a_timestamp(when):
    data = json.loads(result().to_json())
    data["created_at"] = when
    with pytest.raises(ResultError, match="created_at"):
        Result.from_dict(data)

"""End to end: the language server as a subprocess profiles examples/rmsnorm.py
with the real torch.profiler on CPU through the local target.

One module fixture runs the profile once (about 10 s) and records what the
client saw; the other tests start fresh servers on that workspace, which also
shows that hints come back from the store after a restart.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import socket
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from lsprotocol import types

from tests.conftest import EXAMPLES
from tests.support.lsp_client import change, hints, hover, lenses, open_doc, start, stop, until
from trainium_lens.lsp.present import roofline_format
from trainium_lens.model.store import RunStore

NAIVE = "rms_norm_naive"


def execute(client, command: str, arg: dict):
    return client.workspace_execute_command_async(
        types.ExecuteCommandParams(command=command, arguments=[arg])
    )


@dataclass
class Profiled:
    workspace: Path
    env: dict
    reply: dict
    progress: list  # the work-done progress values, in order
    hints: dict[int, str]
    hover_mul: str | None
    lenses: list[str]
    diagnostics: list[types.Diagnostic]
    heat: list[dict]
    run_states: list[dict]
    messages: list[str]
    source: list[str]


def _env(tmp: Path) -> dict:
    return {"TRAINIUM_LENS_CACHE": str(tmp / "cache"), "OMP_NUM_THREADS": "1"}


@pytest.fixture(scope="module")
def profiled(tmp_path_factory) -> Profiled:
    tmp = tmp_path_factory.mktemp("lsp-e2e")
    ws = tmp / "ws"
    ws.mkdir()
    shutil.copy(EXAMPLES / "rmsnorm.py", ws / "rmsnorm.py")
    env = _env(tmp)

    async def run() -> Profiled:
        client = await start(ws, env=env)
        try:
            uri = open_doc(client, ws / "rmsnorm.py")
            reply = await execute(client, "trainiumLens.profile", {"uri": uri, "function": NAIVE})
            await until(
                lambda: (
                    [s["state"] for s in client.run_states][-1:] == ["ok"]
                    and client.diagnostics.get(uri)
                    and any(h["uri"] == uri and h["lines"] for h in client.heat)
                ),
                "the run's state, findings and heat",
            )
            (token,) = client.progress_reports
            source = (ws / "rmsnorm.py").read_text().splitlines()
            mul_line = next(i for i, t in enumerate(source) if "x2 = x * x" in t)
            return Profiled(
                workspace=ws,
                env=env,
                reply=reply,
                progress=client.progress_reports[token],
                hints=await hints(client, uri),
                hover_mul=await hover(client, uri, mul_line),
                lenses=[lens.command.title for lens in await lenses(client, uri)],
                diagnostics=list(client.diagnostics.get(uri, [])),
                heat=client.heat,
                run_states=client.run_states,
                messages=[m.message for m in client.messages],
                source=source,
            )
        finally:
            await stop(client)

    return asyncio.run(run())


def stored(p: Profiled):
    (run_id,) = p.reply["run_ids"]
    return RunStore(p.workspace).get(run_id)


def test_profile_command_resolves_with_the_run(profiled):
    result = stored(profiled)
    assert profiled.reply["backend"] == "cpu"
    assert re.fullmatch(r"[\d.]+ (µs|ms) cpu · 6 dispatches · \d+ findings?", profiled.reply["headline"]), (
        profiled.reply["headline"]
    )
    assert result.function.name == NAIVE
    assert [s["state"] for s in profiled.run_states] == ["running", "ok"]
    assert not profiled.messages, profiled.messages


def test_progress_begins_reports_the_harness_stages_and_ends(profiled):
    kinds = [v.kind for v in profiled.progress]
    assert kinds[0] == "begin" and kinds[-1] == "end" and set(kinds[1:-1]) == {"report"}
    assert profiled.progress[0].cancellable
    messages = [v.message for v in profiled.progress[1:-1]]
    # Reports of the profiler steps, in order, between the import and the end: the
    # first step, then at most one every 0.25 s (a report costs the next step time);
    # "of" is the plan: warmup + active steps, each paired with an unlabelled one on
    # the CPU backend (the protocol's wait ran as settling calls), more if the host
    # disturbed some.
    protocol = stored(profiled).function.protocol
    step_reports = [m for m in messages if " profile step " in m]
    parsed = [re.fullmatch(rf"{NAIVE}: profile step (\d+)/(\d+)", m) for m in step_reports]
    assert step_reports and all(parsed), step_reports
    numbers = [(int(p.group(1)), int(p.group(2))) for p in parsed if p]
    assert numbers[0] == (1, protocol.warmup + 2 * protocol.active)
    assert [k for k, _of in numbers] == sorted({k for k, _of in numbers})
    assert all(k <= of for k, of in numbers)
    before_steps = messages[: messages.index(step_reports[0])]
    assert any("import" in m for m in before_steps) and any("input" in m for m in before_steps)
    assert messages.index(step_reports[-1]) < len(messages) - 1  # then timing / export
    percents = [v.percentage for v in profiled.progress[1:-1]]
    assert percents == sorted(percents)
    assert profiled.progress[-1].message == profiled.reply["headline"]


def test_hints_on_exactly_the_attributed_lines(profiled):
    result = stored(profiled)
    assert sorted(profiled.hints) == sorted(
        s.line - 1 for s in result.lines if s.self_time_us or s.total_time_us
    )
    for stat in result.lines:
        label = profiled.hints[stat.line - 1]
        assert label.startswith("⏱ ") and " cpu · " in label  # CPU time says so
        parts = label.split(" · ")
        if any(f.kind == "noisy_measurement" for f in result.findings):  # a loaded machine
            assert parts.pop() == "⚠ noisy", label  # said last, after the figures
        marker = roofline_format.marker(result, stat)  # the line's roofline, last (docs/roofline.md)
        assert marker and parts[-1] == marker
        assert parts[-2] == f"{int(stat.calls)} op{'s' if stat.calls != 1 else ''}"
        assert profiled.source[stat.line - 1].strip() == stat.text.strip()


def test_hover_lists_the_ops_with_their_calls(profiled):
    assert "| `aten::mul` | 1 |" in profiled.hover_mul
    assert "CPU self time" in profiled.hover_mul
    assert "command:trainiumLens.openTimeline?" in profiled.hover_mul


def test_code_lens_shows_the_headline(profiled):
    assert "▶ Profile on Trainium" in profiled.lenses
    assert profiled.reply["headline"] in profiled.lenses


def test_dispatch_finding_is_a_diagnostic_in_the_naive_function(profiled):
    result = stored(profiled)
    body = range(result.function.line, result.function.line + 5)  # 1-based def..return
    kinds = {(d.code, d.range.start.line + 1) for d in profiled.diagnostics}
    if any(f.kind == "noisy_measurement" for f in result.findings):
        # judged noisy (a loaded machine): the timing-based hints are withheld and the
        # warning is the diagnostic, on the function's line (analysis/noise.py)
        assert ("noisy_measurement", result.function.line) in kinds, kinds
        assert not [c for c, _ in kinds if c in ("dispatches", "overhead_bound", "memory_bound")], kinds
    else:  # (overhead_bound or memory_bound replace the dispatch hint where the roofline says so)
        assert any(
            code in ("dispatches", "overhead_bound", "memory_bound") and line in body for code, line in kinds
        ), kinds
    assert all(d.source == "Trainium Lens" for d in profiled.diagnostics)
    heat = [h for h in profiled.heat if h["lines"]][-1]
    assert {h["line"] for h in heat["lines"]} == set(profiled.hints)
    assert max(h["intensity"] for h in heat["lines"]) == 1.0


async def test_restart_then_edits_move_and_stale_the_hints(profiled):
    client = await start(profiled.workspace, env=profiled.env)
    try:
        uri = open_doc(client, profiled.workspace / "rmsnorm.py")
        before = await hints(client, uri)
        assert before == profiled.hints  # back from the store after a restart
        # Insert three lines above the function: every hint moves with its line.
        change(client, uri, 2, (0, 0), (0, 0), "# one\n# two\n# three\n")
        moved = await hints(client, uri)
        assert moved == {line + 3: label for line, label in before.items()}
        # Edit the `x2 = x * x` line: its hint is stale, the others are not.
        mul = next(i for i, t in enumerate(profiled.source) if "x2 = x * x" in t) + 3
        change(client, uri, 3, (mul, 4), (mul, 6), "x3")
        edited = await hints(client, uri)
        # stale: its time, share and ops, nothing after them (a roofline marker or "⚠ noisy"
        # would push "(stale)" past the editor's cut)
        assert edited[mul] == " · ".join(moved[mul].split(" · ")[:3]) + " (stale)"
        assert all("stale" not in label for line, label in edited.items() if line != mul)
    finally:
        await stop(client)


def harness_processes(root: int) -> list[int]:
    """Descendants of ``root`` running the harness (from /proc)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], list(children.get(root, []))
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        try:
            if b"trainium_lens.harness" in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(pid)
        except OSError:
            pass
    return found


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when the socket goes


async def test_bad_files_and_an_unreachable_host_give_clear_messages(profiled, tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "broken.py").write_text("# trainium: profile\ndef f(:\n    pass\n")
    (ws / "plain.py").write_text("def f():\n    return 1\n")
    # its message holds a bidi override (a hostile repository's words reach the editor)
    (ws / "raises.py").write_text(
        '# trainium: profile\ndef f():\n    x = 1\n    raise ZeroDivisionError("gpj.\u202eexe")\n'
    )
    shutil.copy(EXAMPLES / "rmsnorm.py", ws / "rmsnorm.py")
    config = tmp_path / "ssh_config"
    config.write_text(
        f"Host lens-unreachable\n  HostName 127.0.0.1\n  Port {_closed_port()}\n"
        f"  UserKnownHostsFile {tmp_path / 'known_hosts'}\n  ConnectTimeout 5\n"
    )
    client = await start(ws, env=_env(tmp_path))
    try:
        uris = {
            name: open_doc(client, ws / name) for name in ("broken.py", "plain.py", "raises.py", "rmsnorm.py")
        }

        reply = await execute(client, "trainiumLens.profile", {"uri": uris["broken.py"]})
        assert reply["kind"] == "parse" and "broken.py:2" in reply["error"]
        reply = await execute(client, "trainiumLens.profile", {"uri": uris["plain.py"]})
        assert reply["kind"] == "no_marked_function"
        assert "# trainium: profile" in reply["error"]
        reply = await execute(client, "trainiumLens.profile", {"uri": uris["raises.py"]})
        assert reply["kind"] == "user_code" and "ZeroDivisionError" in reply["error"]
        await until(lambda: client.diagnostics.get(uris["raises.py"]), "the error on its line")
        (diag,) = client.diagnostics[uris["raises.py"]]
        assert diag.range.start.line == 3 and diag.severity == types.DiagnosticSeverity.Error
        assert "\u202e" not in diag.message and "gpj.\\u202eexe" in diag.message, diag.message

        client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(
                settings={"trainiumLens": {"host": "lens-unreachable", "sshConfig": str(config)}}
            )
        )
        reply = await execute(client, "trainiumLens.profile", {"uri": uris["rmsnorm.py"], "function": NAIVE})
        assert reply["kind"] == "target" and "lens-unreachable" in reply["error"]

        shown = [m.message for m in client.messages]
        assert len(shown) == 4 and all(m.startswith("Trainium Lens: ") for m in shown), shown
        assert all("\n" not in m for m in shown[:2])
        assert not [m for m in shown if "\u202e" in m], shown  # shown escaped, never applied
        # Still serving: a request after all that is answered.
        assert [lens.command.title for lens in await lenses(client, uris["rmsnorm.py"])]
    finally:
        await stop(client)


async def test_cancel_ends_progress_keeps_earlier_hints_and_stores_nothing(profiled, tmp_path):
    ws = tmp_path / "ws"
    shutil.copytree(profiled.workspace, ws)
    runs_before = sorted(p.name for p in (ws / ".trainium-lens" / "runs").iterdir())
    # The cold path's cancel (the warm worker's: tests/integration/lsp/test_warm.py).
    client = await start(ws, env=_env(tmp_path), options={"trainiumLens": {"warmWorker": {"idleSeconds": 0}}})
    try:
        uri = open_doc(client, ws / "rmsnorm.py")
        earlier = await hints(client, uri)
        assert earlier
        task = asyncio.ensure_future(execute(client, "trainiumLens.profile", {"uri": uri, "function": NAIVE}))
        deadline = time.monotonic() + 60
        while not any(len(v) > 1 for v in client.progress_reports.values()):
            assert time.monotonic() < deadline and not task.done()
            await asyncio.sleep(0.05)
        (token,) = client.progress_reports
        assert harness_processes(client._server.pid)  # it is running now
        client.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token=token))
        reply = await asyncio.wait_for(task, 30)
        assert reply["kind"] == "cancelled" and reply["run_ids"] == []
        assert not harness_processes(client._server.pid)  # the run was stopped, not left behind
        assert client.progress_values[token][-1].kind == "end"
        assert client.progress_values[token][-1].message == "Cancelled"
        assert sorted(p.name for p in (ws / ".trainium-lens" / "runs").iterdir()) == runs_before
        assert await hints(client, uri) == earlier
        assert client.run_states[-1]["state"] == "cancelled"
        # A second profile while one runs is refused clearly (then the first is cancelled).
        first = asyncio.ensure_future(
            execute(client, "trainiumLens.profile", {"uri": uri, "function": NAIVE})
        )
        while len(client.progress_reports) < 2:
            await asyncio.sleep(0.05)
        second = await execute(client, "trainiumLens.profile", {"uri": uri, "line": 21})
        assert second["kind"] == "busy" and "already being profiled" in second["error"]
        token2 = [t for t in client.progress_reports if t != token][0]
        while not client.progress_reports[token2]:
            await asyncio.sleep(0.05)
        client.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token=token2))
        assert (await asyncio.wait_for(first, 30))["kind"] == "cancelled"
    finally:
        await stop(client)

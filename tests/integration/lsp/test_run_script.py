"""Profile Script from the editor, over real LSP: the code lens on the script's
``if __name__ == "__main__":`` line, ``trainiumLens.runScript`` running the
unmodified training script (args from the request, else the
``trainiumLens.script.args`` setting) with work-done progress, and the stored
run's hints on the model module the steps ran through; a script that raises
leaves one line, a diagnostic on its line and nothing stored."""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types

from tests.integration.cli.test_run import project, stored
from tests.support.lsp_client import hints, lenses, open_doc, start, stop, until
from tests.support.procs import left_running
from trainium_lens.lsp.workspace_trust import PROFILE_REFUSED


def _env(tmp: Path) -> dict:
    return {"TRAINIUM_LENS_CACHE": str(tmp / "cache"), "OMP_NUM_THREADS": "1"}


def execute(client, arg: dict):
    return client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="trainiumLens.runScript", arguments=[arg])
    )


def _line(path: Path, start: str) -> int:
    """0-based line of the first line starting (stripped) with ``start``."""
    return next(i for i, s in enumerate(path.read_text().splitlines()) if s.strip().startswith(start))


async def test_code_lens_then_run_gives_hints_on_the_model_file(tmp_path: Path) -> None:
    ws = project(tmp_path)
    train, model = ws / "tinylm" / "train.py", ws / "tinylm" / "model.py"
    options = {"settings": {"trainiumLens": {"script": {"args": ["--steps", "12"]}}}}
    client = await start(ws, options=options, env=_env(tmp_path))
    try:
        uri = open_doc(client, train)
        found = [
            lens
            for lens in await lenses(client, uri)
            if lens.command and "Profile Script" in lens.command.title
        ]
        assert [lens.range.start.line for lens in found] == [_line(train, 'if __name__ == "__main__":')]
        assert found[0].command.command == "trainiumLens.profileScript"  # the client's: it reads launch.json
        assert list(found[0].command.arguments or []) == [{"uri": uri}]
        model_uri = open_doc(client, model)
        assert not [
            lens for lens in await lenses(client, model_uri) if "Profile Script" in lens.command.title
        ]

        reply = await execute(client, {"uri": uri})  # no args: the setting's
        assert reply["run_ids"], reply
        assert reply["exit_status"] == 0 and reply["backend"] == "cpu"
        (token,) = client.progress_reports
        messages = [getattr(v, "message", "") or "" for v in client.progress_reports[token]]
        assert any("--steps 12" in m for m in messages[:1])  # begin names the command
        assert any("profile step" in m for m in messages)
        assert isinstance(client.progress_reports[token][-1], types.WorkDoneProgressEnd)
        assert len(stored(ws)) == 1
        # the script's own output reaches the log (the server's stdout is the protocol's channel)
        logged = [m.message for m in client.log_messages]
        assert any(m.startswith("step 12 loss") for m in logged) and "done" in logged
        model_hints = await hints(client, model_uri)
        assert {13, 14, 15} <= {line + 1 for line in model_hints}  # the Block's forward lines
        assert _line(train, "optimizer.step()") in await hints(client, uri)
        await until(lambda: [s["state"] for s in client.run_states][-1:] == ["ok"], "the run's ok state")
    finally:
        await stop(client)
    assert left_running(str(tmp_path / "cache")) == []


async def test_a_script_that_raises_is_one_line_and_a_diagnostic(tmp_path: Path) -> None:
    ws = project(tmp_path)
    train = ws / "tinylm" / "train.py"
    client = await start(ws, env=_env(tmp_path))
    try:
        uri = open_doc(client, train)
        reply = await execute(
            client, {"uri": uri, "args": ["--fail-at", "2"], "env": {"X": "1"}, "cwd": str(ws)}
        )
        assert reply["run_ids"] == [] and reply["kind"] == "script", reply
        assert "RuntimeError: diverged at step 2" in reply["error"] and "\n" not in reply["error"]
        assert stored(ws) == []
        raise_line = _line(train, "raise RuntimeError")
        await until(
            lambda: any(d.range.start.line == raise_line for d in client.diagnostics.get(uri, [])),
            "a diagnostic on the raise",
        )
    finally:
        await stop(client)
    assert left_running(str(tmp_path / "cache")) == []


async def test_refused_in_restricted_mode_and_on_bad_arguments(tmp_path: Path) -> None:
    ws = project(tmp_path)
    train = ws / "tinylm" / "train.py"
    client = await start(ws, options={"settings": {"trainiumLens": {"trusted": False}}}, env=_env(tmp_path))
    try:
        uri = open_doc(client, train)
        assert await execute(client, {"uri": uri}) == {
            "run_ids": [],
            "error": PROFILE_REFUSED,
            "kind": "untrusted",
        }
    finally:
        await stop(client)
    client = await start(ws, env=_env(tmp_path))
    try:
        uri = open_doc(client, train)
        reply = await execute(client, {"uri": uri, "args": "--lr 1"})
        assert reply["kind"] == "usage" and "args must be a list" in reply["error"]
        reply = await execute(client, {"uri": uri, "cwd": str(ws / "nowhere")})
        assert reply["kind"] == "usage" and "is not a folder" in reply["error"]
    finally:
        await stop(client)
    assert stored(ws) == []

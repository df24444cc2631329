"""After ``trainium-lens run -- python train.py`` (the real CLI on the unmodified
script), the language server shows the stored run's hints on every file the
steps ran through: the model module's lines and the script's loop, over real LSP."""

from __future__ import annotations

from pathlib import Path

from tests.integration.cli.test_run import lens_run, project
from tests.support.lsp_client import hints, open_doc, start, stop


async def test_hints_on_the_model_file_and_the_loop_after_a_run(tmp_path: Path) -> None:
    ws = project(tmp_path)
    proc, _ = lens_run(ws, tmp_path, "--steps", "2:2", "--", "python", "tinylm/train.py", "--steps", "6")
    assert proc.returncode == 0, proc.stderr[-3000:]
    client = await start(ws)
    try:
        model = await hints(client, open_doc(client, ws / "tinylm" / "model.py"))
        assert {13, 14, 15} <= {line + 1 for line in model}  # the Block's forward lines
        train_src = (ws / "tinylm" / "train.py").read_text().splitlines()
        step = next(i for i, s in enumerate(train_src) if s.strip() == "optimizer.step()")
        loop = await hints(client, open_doc(client, ws / "tinylm" / "train.py"))
        assert step in loop
    finally:
        await stop(client)

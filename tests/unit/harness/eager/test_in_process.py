"""A callable of this process under the protocol (a notebook cell in its kernel): the
cells' files are the user's wherever the workspace is, their text comes from
linecache, and a cell's lines keep the numbers it was compiled with."""

from __future__ import annotations

import linecache
from pathlib import Path

import pytest

from trainium_lens.harness.attribution.build import SourceText
from trainium_lens.harness.eager.in_process import (
    CellCall,
    CollectedEvents,
    InProcessJob,
    ProfilerInCell,
    profile_callable,
)
from trainium_lens.harness.events import HarnessError
from trainium_lens.harness.job.loader import UserCode

CELL = "/tmp/ipykernel_4242/1234.py"
CELL_TEXT = "%%trainium_lens\nimport torch\ny = torch.ones(8) * 3\nz = y.sum()\n"


def cells(filename: str) -> str | None:
    return (
        "ipykernel-cell/" + filename.rsplit("/", 1)[-1]
        if filename.startswith("/tmp/ipykernel_4242/")
        else None
    )


def test_a_cell_file_is_the_users_and_its_text_comes_from_linecache(tmp_path: Path) -> None:
    user = UserCode(str(tmp_path))
    assert user.relpath(CELL) is None  # outside the workspace, and no kernel said otherwise
    user = UserCode(str(tmp_path))
    user.cell_name = cells
    assert user.relpath(CELL) == "ipykernel-cell/1234.py"
    assert user.relpath("/tmp/elsewhere/1234.py") is None
    linecache.cache[CELL] = (len(CELL_TEXT), None, CELL_TEXT.splitlines(True), CELL)
    assert SourceText(user.root, user.abspath).line("ipykernel-cell/1234.py", 3) == "y = torch.ones(8) * 3"


def job(tmp_path: Path) -> InProcessJob:
    return InProcessJob(
        batch_id="20261207-000000-abcd",
        workspace_root=str(tmp_path),
        run_dir=str(tmp_path / "run"),
        rel_file="ipykernel-cell/1234.py",
        name="cell",
        first_line=1,
        last_line=4,
        backend="cpu",
        protocol={"wait": 0, "warmup": 0, "active": 1, "timing_calls": 2},
        cell_name=cells,
    )


def test_a_cell_is_profiled_at_its_own_line_numbers(tmp_path: Path) -> None:
    import ast

    linecache.cache[CELL] = (len(CELL_TEXT), None, CELL_TEXT.splitlines(True), CELL)
    tree = ast.parse("".join(CELL_TEXT.splitlines(True)[1:]))
    ast.increment_lineno(tree, 1)  # the body after the %% line, as the magic compiles it
    namespace: dict = {}
    call = CellCall(compile(tree, CELL, "exec"), namespace)
    doc = profile_callable(call, job(tmp_path), CollectedEvents())
    [result] = doc["results"]
    lines = {(ln["file"], ln["line"]): ln["text"] for ln in result["lines"]}
    assert lines[("ipykernel-cell/1234.py", 3)] == "y = torch.ones(8) * 3"
    assert float(namespace["z"]) == 24.0 and call.calls > 2


def test_a_cell_that_starts_a_profiler_is_stopped_in_its_first_run(tmp_path: Path) -> None:
    code = compile("import torch\nwith torch.profiler.profile():\n    y = torch.ones(2)\n", CELL, "exec")
    call = CellCall(code, {})
    with pytest.raises(HarnessError) as caught:
        profile_callable(call, job(tmp_path), CollectedEvents())
    assert isinstance(caught.value.__context__, ProfilerInCell) and call.calls == 1
    import torch

    with torch.profiler.profile():  # the patch is gone after the first run
        torch.ones(2)


def test_include_patches_go_with_the_run(tmp_path: Path) -> None:
    """The kernel lives on: --include's checks in torch.nn.functional are put back."""
    import dataclasses

    import torch
    import torch.nn.functional as F

    code = compile("import torch.nn.functional as F\ny = F.softmax(torch.ones(4), -1)\n", CELL, "exec")
    call = CellCall(code, {"torch": torch})
    profile_callable(
        call, dataclasses.replace(job(tmp_path), include=["torch.nn.functional"]), CollectedEvents()
    )
    assert F.has_torch_function is torch.overrides.has_torch_function
    assert F.has_torch_function_unary is torch.overrides.has_torch_function_unary
    assert F.has_torch_function_variadic is torch.overrides.has_torch_function_variadic

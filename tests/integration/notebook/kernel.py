"""A notebook executed in a real ipykernel by nbclient, as Jupyter executes one, and
what its cells showed: shared by the notebook tests (docs/notebooks.md)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import nbformat
from ipykernel.compiler import get_tmp_hash_seed, murmur2_x86
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

from tests.conftest import SERVER
from trainium_lens.model.result import Result
from trainium_lens.model.store import RunStore


def execute(
    root: Path, cells: list[str], env: dict[str, str] | None = None, work: Path | None = None
) -> tuple[Any, Path]:
    """``cells`` executed in order in a fresh kernel running this interpreter, its
    working folder ``work`` (default: a new ``root/work``); the executed notebook and
    that folder."""
    kernels = root / "kernels" / "lens"
    if work is None:
        work = root / "work"
        work.mkdir()
    kernels.mkdir(parents=True)
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "lens",
        "language": "python",
        "env": {"PYTHONPATH": str(SERVER), "TRAINIUM_LENS_CACHE": str(root / "cache"), **(env or {})},
    }
    (kernels / "kernel.json").write_text(json.dumps(spec), encoding="utf-8")
    km = KernelManager(
        kernel_name="lens", kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(root / "kernels")])
    )
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    client = NotebookClient(
        nb, km=km, timeout=600, allow_errors=True, resources={"metadata": {"path": str(work)}}
    )
    client.execute()
    return nb, work


def cell_rel(source: str) -> str:
    """The name a result gives a cell: ipykernel's file name for its text (compiler.py)."""
    return f"ipykernel-cell/{murmur2_x86(source, get_tmp_hash_seed())}.py"


def text_of(nb: Any, source: str, name: str = "stdout") -> str:
    """What the cell printed on ``name``; on stdout, its displayed plain text too."""
    cell = next(c for c in nb.cells if c.source == source)
    out = []
    for o in cell.outputs:
        if o.output_type == "stream" and o.name == name:
            out.append(o.text)
        elif o.output_type == "display_data" and name == "stdout":
            out.append(o.data.get("text/plain", ""))
    return "".join(out)


def html_of(nb: Any, source: str) -> str:
    cell = next(c for c in nb.cells if c.source == source)
    return "".join(o.data.get("text/html", "") for o in cell.outputs if o.output_type == "display_data")


def errors_of(nb: Any, source: str) -> list[Any]:
    cell = next(c for c in nb.cells if c.source == source)
    return [o for o in cell.outputs if o.output_type == "error"]


def results_for(work: Path, source: str) -> list[Result]:
    return [r for r in RunStore(work).load_all() if r.function.file == cell_rel(source)]


def result_for(work: Path, source: str) -> Result:
    found = results_for(work, source)
    assert len(found) == 1, [r.function.file for r in RunStore(work).load_all()]
    return found[0]


def line(result: Result, file: str, number: int) -> Any:
    return next(ln for ln in result.lines if ln.file == file and ln.line == number)

"""A stored fix is measured and applied only when it is the edit the builder
(``analysis/fixes``) writes of the file as it is now (``engine/fixes.checked_edit``):
a committed result's replacement runs during the measurement and lands in the
file, so a replacement, range or title that differs is refused."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tests.unit.model.test_untrusted_results import result as stored_result
from trainium_lens.analysis.fixes.optimizer import optimizer_edit
from trainium_lens.engine.fixes import checked_edit
from trainium_lens.errors import UsageError
from trainium_lens.model.result import Finding

SRC = "import torch\n\nmodel = torch.nn.Linear(4, 4)\nopt = torch.optim.AdamW(model.parameters(), lr=1e-3)\n"
FILE = "examples/rmsnorm.py"


@pytest.fixture
def ws(tmp_path) -> Path:
    (tmp_path / "examples").mkdir()
    (tmp_path / FILE).write_text(SRC)
    return tmp_path


def _finding(**changes) -> Finding:
    edit = optimizer_edit(SRC, FILE, "AdamW", "fused=True", "rms_norm_naive")
    assert edit is not None
    return Finding(
        "optimizer_choice",
        "info",
        FILE,
        4,
        "m",
        fix="AdamW(..., fused=True)",
        edit=dataclasses.replace(edit, **changes),
    )


def test_the_edit_the_builder_writes_is_measured(ws):
    finding = _finding()
    assert checked_edit(ws, stored_result(), finding) == finding.edit


@pytest.mark.parametrize(
    "changes",
    [
        {"replacement": 'lr=__import__("os").system("id") or 1e-3, fused=True'},
        {"replacement": "lr=1e-3, fused=True\nimport os"},
        {"title": "AdamW(..., foreach=True)"},
        {"start_col": 0, "end_col": 52, "original": "opt = torch.optim.AdamW(model.parameters(), lr=1e-3)"},
    ],
)
def test_a_stored_edit_that_differs_is_refused_with_one_line(ws, changes):
    with pytest.raises(UsageError) as err:
        checked_edit(ws, stored_result(), _finding(**changes))
    assert "not the edit Trainium Lens builds" in str(err.value) and "\n" not in str(err.value)
    assert (ws / FILE).read_text() == SRC


def test_a_fix_offered_on_a_noisy_run_is_built_again_as_its_finding(ws):
    # a noisy run withholds the optimizer finding and offers its edit (analysis/noise.py);
    # on a busy host that is most runs, and fix refused every one as "not the edit"
    stored = _finding()
    offered = Finding("fix_offered", "hint", FILE, 4, "m", edit=stored.edit)
    assert checked_edit(ws, stored_result(), offered) == stored.edit
    assert stored.edit is not None
    other = dataclasses.replace(stored.edit, replacement="x")
    forged = Finding("fix_offered", "hint", FILE, 4, "m", edit=other)
    with pytest.raises(UsageError):
        checked_edit(ws, stored_result(), forged)

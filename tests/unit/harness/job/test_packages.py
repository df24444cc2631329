"""Pure parts of real-project support: marked methods and misplaced markers,
where a file's package root is, which results are variants, the include
setting, and library files in the editor."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.lsp_client import make_result
from trainium_lens.analysis.compare import variant_groups
from trainium_lens.harness.job.loader import package_name, resolve_include
from trainium_lens.harness.markers import find_marked, misplaced_markers
from trainium_lens.model.result import LibraryFile, Output

SOURCE = """import torch

class Trainer:
    def __init__(self):
        self.n = 0

    # trainium: profile inputs=make
    @torch.no_grad()
    def step(self, batch):
        return batch

def helper():
    # trainium: profile
    def nested():
        return 1

    class Local:
        # trainium: profile
        def method(self):
            return 2
    return nested
"""


def test_methods_are_marked_as_class_dot_method_and_nested_ones_are_misplaced():
    found = find_marked(SOURCE)
    assert [(m.name, m.marker_line, m.def_line, m.end_line) for m in found] == [("Trainer.step", 7, 9, 10)]
    assert misplaced_markers(SOURCE) == [(13, "nested", 15), (18, "method", 20)]


def test_the_lsp_resolves_a_line_inside_a_method_and_names_nested_markers(tmp_path):
    from trainium_lens.errors import HarnessError
    from trainium_lens.lsp.features.profile import choose_functions, parse_request

    path = tmp_path / "t.py"
    path.write_text(SOURCE)

    def pick(line):
        return choose_functions(parse_request(({"uri": path.as_uri(), "line": line},)), SOURCE)

    assert pick(9) == ["Trainer.step"]  # 0-based: line 10, inside the method
    nested = r"t.py:13: the marker is above nested\(\), a nested function"
    with pytest.raises(HarnessError, match=nested) as err:
        pick(14)
    assert err.value.kind == "parse" and err.value.line == 13  # the harness's own kind for it


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_package_roots(tmp_path):
    _write(
        tmp_path,
        {
            "src/pkg/__init__.py": "",
            "src/pkg/sub/__init__.py": "",
            "src/pkg/sub/mod.py": "x = 1\n",
            "src/nspkg/deep/rel.py": "from .sibling import x\n",  # namespace package, src layout
            "tools/nsrel.py": "from . import other\n",  # namespace package at the workspace root
            "scripts/plain.py": "import os\n",  # a top-level script: loaded by path as before
        },
    )
    src = str((tmp_path / "src").resolve())
    assert package_name(str(tmp_path / "src/pkg/sub/mod.py"), str(tmp_path)) == (src, "pkg.sub.mod")
    assert package_name(str(tmp_path / "src/nspkg/deep/rel.py"), str(tmp_path)) == (src, "nspkg.deep.rel")
    assert package_name(str(tmp_path / "tools/nsrel.py"), str(tmp_path)) == (
        str(tmp_path.resolve()),
        "tools.nsrel",
    )
    assert package_name(str(tmp_path / "scripts/plain.py"), str(tmp_path)) is None


def test_resolve_include_finds_packages_and_modules():
    import torch

    site = Path(torch.__file__).resolve().parents[1]
    functional = resolve_include("torch.nn.functional")
    assert functional is not None and functional[0].endswith("torch/nn/functional.py")
    assert Path(functional[1]) == site
    package = resolve_include("torch.nn")
    assert package is not None and package[0].endswith("torch/nn") and Path(package[1]) == site
    assert resolve_include("no_such_package_xyz") is None
    assert resolve_include("bad-name") is None


def _result(name, line, inputs=None, compare=None, shape=(4, 8), dtype="float32"):
    r = make_result("m.py", name, line, {line + 1: ("return x", 10.0, [])}, run_id=f"b-{line}")
    r.function.inputs, r.function.compare = inputs, compare
    r.output = Output(dtype=dtype, shape=list(shape))
    return r


def test_variants_share_inputs_and_output_or_name_a_compare_group():
    a = _result("naive", 1, inputs="make")
    b = _result("fused", 10, inputs="make")
    train = _result("train_step", 20, inputs="make", shape=())  # same inputs, a loss: not a variant
    lone = _result("other", 30)  # no inputs: a variant only of other functions without
    x = _result("x", 40, inputs="mx", compare="attn")
    y = _result("y", 50, inputs="my", compare="attn", shape=(2,))  # explicit: kept together
    groups, others = variant_groups([a, b, train, lone, x, y])
    assert [[r.function.name for r in g] for g in groups] == [["naive", "fused"], ["x", "y"]]
    assert [r.function.name for r in others] == ["train_step", "other"]
    assert variant_groups([lone, train]) == ([], [lone, train])
    no_args = _result("also_none", 60)
    assert variant_groups([lone, no_args, train]) == ([[lone, no_args]], [train])
    apart = _result("apart", 70, compare="mine")  # compare= takes it out of the no-inputs group
    assert variant_groups([lone, apart]) == ([], [lone, apart])


def test_include_setting_and_job_field(tmp_path):
    from trainium_lens.errors import UsageError
    from trainium_lens.lsp.settings import parse
    from trainium_lens.model.job import make_job

    settings, warnings = parse({"trainiumLens": {"include": ["transformers.models.llama", "torch.nn"]}})
    assert settings.include == ("transformers.models.llama", "torch.nn") and not warnings
    settings, warnings = parse({"trainiumLens": {"include": ["bad name"]}})
    assert settings.include == () and len(warnings) == 1 and "include" in warnings[0]
    file = tmp_path / "f.py"
    file.write_text("x = 1\n")
    job = make_job(file, workspace=tmp_path, include=["torch.nn.functional", "torch.nn.functional"])
    assert job.to_spec("/w", "/r", "local")["include"] == ["torch.nn.functional"]
    with pytest.raises(UsageError, match="dotted package name"):
        make_job(file, workspace=tmp_path, include=["torch/nn"])


def _opened_library_file(workspace: Path, installed: Path):
    """A stored run naming INSTALLED as ``torch/nn/functional.py``, a server that knows
    WORKSPACE, and the file opened in it: it maps to the result's module path and run."""
    from pygls.uris import from_fs_path

    from trainium_lens.lsp.server import LensServer
    from trainium_lens.model.store import RunStore

    result = _result("attend", 3)
    result.lines[0].file = "torch/nn/functional.py"
    result.library_files = [LibraryFile(file="torch/nn/functional.py", path=str(installed))]
    RunStore(workspace).save(result)
    ls = LensServer()
    ls.index_for(workspace.resolve())
    runs = ls.document_runs(from_fs_path(str(installed)))
    assert runs is not None and runs.file == "torch/nn/functional.py"
    assert [r.run_id for r in runs.index.current_touching(runs.file)] == [result.run_id]
    return ls, result


def test_an_included_file_opened_in_the_editor_gets_its_runs(tmp_path):
    """Go to definition into site-packages: the installed file maps to the module
    path the result uses, and that module path maps back to the file's URI."""
    import torch.nn.functional as F
    from pygls.uris import from_fs_path

    installed = Path(F.__file__).resolve()
    ls, result = _opened_library_file(tmp_path, installed)
    assert ls.uri_for(tmp_path.resolve(), "torch/nn/functional.py") == from_fs_path(str(installed))
    assert ls.document_runs(from_fs_path(str(installed.parent / "modules" / "linear.py"))) is None
    json.dumps(result.to_dict())  # library_files round-trips as plain JSON


def test_an_included_file_in_a_venv_outside_every_workspace_gets_its_runs(tmp_path):
    """The interpreter's site-packages need not lie under the workspace (~/.venvs,
    conda, a venv shared per machine): its file still maps to the result's module path."""
    from pygls.uris import from_fs_path

    installed = tmp_path / "env" / "lib" / "python3.11" / "site-packages" / "torch" / "nn" / "functional.py"
    installed.parent.mkdir(parents=True)
    installed.write_text("def linear(x):\n    return x\n")
    workspace = tmp_path / "project"
    workspace.mkdir()
    ls, _ = _opened_library_file(workspace, installed)
    other = installed.parent / "modules.py"
    other.write_text("x = 1\n")
    assert ls.document_runs(from_fs_path(str(other))) is None  # a library file no result names


def test_a_method_without_inputs_is_told_to_return_the_instance_first():
    from trainium_lens.harness.events import HarnessError
    from trainium_lens.harness.job.precheck import check

    source = "class T:\n    # trainium: profile\n    def step(self, batch):\n        return batch\n"
    with pytest.raises(HarnessError, match=r"T.step needs arguments \(self, batch\).*instance first"):
        check(source, find_marked(source), "t.py")

"""Pure parts of the harness: markers, spec/protocol precedence, the Neuron
helpers (with a stand-in ``torch_neuronx`` — no Trainium exists here), and the
rules that let the harness run alone on a target (Python 3.10, no package imports)."""

from __future__ import annotations

import ast
import importlib.util
import logging
import sys
import types
import warnings
from pathlib import Path

import pytest

from tests.conftest import ROOT
from trainium_lens.harness.eager import neuron
from trainium_lens.harness.events import HarnessError
from trainium_lens.harness.markers import Marked, find_marked
from trainium_lens.harness.spec import parse_spec, protocol_for, select

HARNESS = ROOT / "server" / "trainium_lens" / "harness"

SOURCE = """import torch

# trainium: profile
def a():
    return 1

# trainium: profile inputs=make warmup=3 active=10  # a comment
@torch.no_grad()
@staticmethod
def b(x):
    y = x
    return y

# not a marker
def c():
    pass

#trainium:profile timing_calls=7
async def d():
    pass

class K:
    # trainium: profile
    def method(self):
        pass
"""


def test_find_marked():
    found = find_marked(SOURCE)
    assert [m.name for m in found] == ["a", "b", "d", "K.method"]  # methods: Class.method
    a, b, d, method = found
    assert (method.marker_line, method.def_line) == (23, 24)
    assert (a.marker_line, a.def_line, a.end_line, a.options) == (3, 4, 5, {})
    assert (b.marker_line, b.def_line, b.end_line) == (7, 10, 12)
    assert b.options == {"inputs": "make", "warmup": "3", "active": "10"}
    assert d.options == {"timing_calls": "7"}


def test_find_marked_raises_syntax_error():
    with pytest.raises(SyntaxError):
        find_marked("# trainium: profile\ndef f(:\n  pass\n")


def spec(**kw):
    data = {"batch_id": "b", "workspace_root": "/w", "file": "f.py", "run_dir": "/r"}
    data.update(kw)
    import json

    return parse_spec(json.dumps(data))


def test_protocol_precedence_defaults_marker_spec():
    m = Marked("f", 2, 1, 3, {"warmup": "3", "active": "10"})
    assert protocol_for(m, spec(), "f.py") == {"wait": 2, "warmup": 3, "active": 10, "timing_calls": 20}
    assert protocol_for(m, spec(protocol={"active": 4}), "f.py")["active"] == 4


@pytest.mark.parametrize(
    "options, words",
    [
        ({"colour": "x"}, "unknown marker option"),
        ({"active": "0"}, "at least 1"),
        ({"warmup": "lots"}, "integer"),
        ({"inputs": ""}, "function name"),
    ],
)
def test_bad_marker_options(options, words):
    with pytest.raises(HarnessError) as info:
        protocol_for(Marked("f", 2, 1, 3, options), spec(), "f.py")
    assert info.value.kind == "parse" and info.value.line == 1 and words in info.value.message


@pytest.mark.parametrize(
    "bad",
    [
        {"protocol": {"steps": 3}},
        {"backend": "tpu"},
        {"workspace_root": "relative"},
        {"line": 0},
        {"run_dir": ""},
    ],
)
def test_bad_spec(bad):
    with pytest.raises(HarnessError) as info:
        spec(**bad)
    assert info.value.kind == "spec"


def test_select_by_name_and_line():
    marked = find_marked(SOURCE)
    assert [m.name for m in select(marked, spec(functions=["d", "a"]), "f.py")] == ["a", "d"]
    assert [m.name for m in select(marked, spec(line=11), "f.py")] == ["b"]
    assert [m.name for m in select(marked, spec(line=7), "f.py")] == ["b"]  # the marker line
    with pytest.raises(HarnessError) as info:
        select(marked, spec(line=14), "f.py")
    assert info.value.kind == "unknown_function"


# -- Neuron helpers, against a stand-in torch_neuronx --------------------------


def test_accepted_kwargs_follows_the_installed_signature():
    def new_config(modes, profile_output_dir, capture_enabled_for_nc="0", correlate_device_time=False):
        pass

    def old_config(modes, profile_output_dir, capture_enabled_for_nc="0", **extra):
        pass

    wanted = {"modes": [1], "profile_output_dir": "/p", "correlate_device_time": True}
    opt = ("correlate_device_time",)
    assert neuron.accepted_kwargs(new_config, wanted, opt) == (wanted, [])
    kept, dropped = neuron.accepted_kwargs(old_config, wanted, opt)
    assert "correlate_device_time" not in kept and dropped == ["correlate_device_time"]


def test_pair_neff_ntff():
    files = [
        "/p/i-1_pid_9/neff_395760075800974.neff",
        "/p/i-1_pid_9/395760075800974_instid_0_vnc_0.ntff",
        "/p/i-1_pid_9/neff_11_vnc_0.neff",
        "/p/i-1_pid_9/22_instid_0_vnc_0.ntff",
        "/p/i-1_pid_9/trace_info.pb",
    ]
    assert neuron.pair_neff_ntff(files) == [
        {"neff": "/p/i-1_pid_9/neff_11_vnc_0.neff", "ntff": None},
        {"neff": None, "ntff": "/p/i-1_pid_9/22_instid_0_vnc_0.ntff"},
        {
            "neff": "/p/i-1_pid_9/neff_395760075800974.neff",
            "ntff": "/p/i-1_pid_9/395760075800974_instid_0_vnc_0.ntff",
        },
    ]


def test_fallback_ops_and_inspect_clash():
    msgs = [
        "Operator 'aten::_unique2' fell back to CPU",
        "unrelated",
        "W: Operator 'aten::nonzero' fell back to CPU",
        "Operator 'aten::_unique2' fell back to CPU",
    ]
    assert neuron.fallback_ops(msgs) == ["aten::_unique2", "aten::nonzero"]
    assert neuron.inspect_clash({"NEURON_RT_INSPECT_ENABLE": "1"})
    assert not neuron.inspect_clash({"NEURON_RT_INSPECT_ENABLE": "0"})
    assert not neuron.inspect_clash({})


@pytest.fixture
def standin_neuronx(monkeypatch):
    """A stand-in for torch_neuronx.profiling (no Trainium here), recording its calls."""
    calls = {}

    class ProfileMode:
        DEVICE, RUNTIME = "DEVICE", "RUNTIME"

    class NeuronConfig:
        def __init__(self, modes, profile_output_dir, capture_enabled_for_nc="0"):
            calls["config"] = dict(
                modes=modes,
                profile_output_dir=profile_output_dir,
                capture_enabled_for_nc=capture_enabled_for_nc,
            )

    class NeuronProfiler:
        def __init__(self, config):
            self.config = config

        def export_trace(self, prof):
            calls["exported"] = prof

    pkg = types.ModuleType("torch_neuronx")
    prof = types.ModuleType("torch_neuronx.profiling")
    vars(prof).update(NeuronConfig=NeuronConfig, ProfileMode=ProfileMode, NeuronProfiler=NeuronProfiler)
    vars(pkg).update(profiling=prof)
    monkeypatch.setitem(sys.modules, "torch_neuronx", pkg)
    monkeypatch.setitem(sys.modules, "torch_neuronx.profiling", prof)
    return calls


def test_neuron_backend_against_standin(standin_neuronx, tmp_path, monkeypatch):
    import torch

    backend = neuron.NeuronBackend(torch)
    kwargs = backend.profiler_kwargs(str(tmp_path), "r-0")
    config = standin_neuronx["config"]
    assert config["modes"] == ["DEVICE", "RUNTIME"] and config["capture_enabled_for_nc"] == "0"
    assert config["profile_output_dir"] == str(tmp_path / "r-0.neuron")
    assert kwargs["on_trace_ready"].__func__.__name__ == "export_trace"
    assert set(kwargs) == {"experimental_config", "on_trace_ready"}
    pa = torch.profiler.ProfilerActivity
    assert backend.activities() == [pa.CPU, pa.PrivateUse1]

    monkeypatch.setenv("NEURON_RT_INSPECT_ENABLE", "1")
    backend.start_capture()
    logging.getLogger("torch_neuronx").warning("Operator 'aten::_unique2' fell back to CPU")
    warnings.warn("Operator 'aten::nonzero' fell back to CPU", stacklevel=1)
    signals = backend.stop_capture()
    assert signals["cpu_fallback_ops"] == ["aten::_unique2", "aten::nonzero"]
    assert signals["neuron_rt_inspect_clash"] is True
    assert any("correlate_device_time" in w for w in signals["warnings"])
    assert any("NEURON_RT_INSPECT_ENABLE" in w for w in signals["warnings"])
    logging.getLogger("torch_neuronx").warning("Operator 'aten::late' fell back to CPU")
    assert backend.messages[-1] != "Operator 'aten::late' fell back to CPU"  # handler removed

    out = Path(config["profile_output_dir"]) / "i-0_pid_1"
    out.mkdir(parents=True)
    (out / "neff_5.neff").write_text("")
    (out / "5_instid_0_vnc_0.ntff").write_text("")
    art = backend.artifacts(str(tmp_path))
    assert art["neff_ntff"] == [
        {"neff": str(out / "neff_5.neff"), "ntff": str(out / "5_instid_0_vnc_0.ntff")}
    ]


def test_neuron_unavailable_here():
    import torch

    assert "torch_neuronx is not installed" in neuron.unavailable_reason(torch)


def test_cpu_and_privateuse1_activities_profile_together():
    import torch

    pa = torch.profiler.ProfilerActivity
    with torch.profiler.profile(activities=[pa.CPU, pa.PrivateUse1]) as prof:
        torch.ones(3) * 2
    assert any(e.name == "aten::mul" for e in prof.events())


# -- the harness runs alone on a target -----------------------------------------


# What the harness may import (stdlib, torch, itself) and that the core imports none of
# its internals are import-linter contracts (pyproject.toml, run by scripts/check.sh);
# this test keeps what they do not see: the files parse as Python 3.10, a host's floor.
@pytest.mark.parametrize(
    "path", sorted(HARNESS.rglob("*.py")), ids=lambda p: p.relative_to(HARNESS).as_posix()
)
def test_harness_module_parses_on_python_3_10(path):
    tree = ast.parse(path.read_text(), feature_version=(3, 10))
    relative = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level]
    assert not relative, f"absolute imports only (lines {relative})"


def test_xla_flavour_is_detected_and_explained(monkeypatch):
    """Stand-ins for the XLA-based torch-neuronx of Trn1 (no such host here)."""
    import importlib.machinery

    import torch

    from trainium_lens.harness.runtime.choose import choose
    from trainium_lens.harness.xla import backend as xla

    for name in ("torch_neuronx", "torch_xla"):
        mod = types.ModuleType(name)
        mod.__spec__ = importlib.machinery.ModuleSpec(name, loader=None)
        monkeypatch.setitem(sys.modules, name, mod)
    assert neuron.flavour(torch) == "xla"

    class StandInXla:  # the real one imports torch_xla, which cannot load here
        def __init__(self, torch):
            self.name, self.neuron_flavour, self.notes = "xla", None, []

    monkeypatch.setattr(xla, "XlaBackend", StandInXla)
    monkeypatch.setattr(xla, "unavailable_reason", lambda: None)
    backend = choose(torch, "auto")  # Trn1: auto picks the xla backend
    assert backend.name == "xla" and backend.neuron_flavour == "xla"
    with pytest.raises(HarnessError) as info:
        choose(torch, "neuron")
    assert info.value.kind == "backend_unavailable" and "XLA" in info.value.message
    assert "--backend xla" in info.value.message


def test_backend_xla_without_torch_xla_is_one_line_naming_the_setup(monkeypatch):
    import torch

    from trainium_lens.harness.runtime.choose import choose
    from trainium_lens.harness.xla import backend as xla

    monkeypatch.setattr(
        xla.importlib.util,
        "find_spec",
        lambda name, *a: None if name == "torch_xla" else importlib.util.find_spec(name),
    )
    with pytest.raises(HarnessError) as info:
        choose(torch, "xla")
    assert info.value.kind == "backend_unavailable"
    assert "\n" not in info.value.message and "scripts/setup-xla.sh" in info.value.message

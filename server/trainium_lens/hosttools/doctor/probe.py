"""Runs ON the target (stdlib only, Python 3.8+), sent on stdin as
``python - WORK_DIR``: one round trip gathers every fact ``doctor`` judges and
prints them as one JSON object. It only observes; judging (pass/fail, the fix)
happens in ``hosttools/doctor/run.py`` on the user's side.
"""

import importlib
import importlib.util
import inspect
import json
import os
import re
import shutil
import subprocess
import sys

NEURON_BIN = "/opt/aws/neuron/bin"


def _tool(name):
    found = shutil.which(name)
    if found:
        return found
    path = os.path.join(NEURON_BIN, name)  # aws-neuronx-tools' home, often not on PATH
    return path if os.access(path, os.X_OK) else None


def _version(dist):
    try:
        from importlib import metadata

        return metadata.version(dist)
    except Exception:
        return None


def probe_torch(facts):
    try:
        import torch
    except Exception as exc:  # ImportError, or a broken install raising anything
        facts["torch_error"] = f"{type(exc).__name__}: {exc}"
        return None
    facts["torch"] = torch.__version__
    return torch


def probe_neuron(facts, torch):
    if importlib.util.find_spec("torch_neuronx") is None:
        return
    facts["torch_neuronx"] = _version("torch-neuronx") or "installed"
    try:
        importlib.import_module("torch_neuronx")
    except Exception as exc:
        facts["torch_neuronx_error"] = f"{type(exc).__name__}: {exc}"
        return
    try:
        native = torch._C._get_privateuse1_backend_name() == "neuron"
    except Exception:
        native = False
    if native:
        facts["neuron_flavour"] = "native"
    elif "torch_xla" in sys.modules or importlib.util.find_spec("torch_xla") is not None:
        facts["neuron_flavour"] = "xla"
    try:
        profiling = importlib.import_module("torch_neuronx.profiling")
    except Exception as exc:
        facts["profiling_error"] = f"{type(exc).__name__}: {exc}"
        return
    names = {}
    for name in ("NeuronConfig", "ProfileMode", "NeuronProfiler"):
        names[name] = hasattr(profiling, name)
    facts["profiling_names"] = names
    config = getattr(profiling, "NeuronConfig", None)
    if config is not None:
        try:
            facts["neuron_config_params"] = list(inspect.signature(config).parameters)
        except (TypeError, ValueError):
            facts["neuron_config_params"] = None
    modes = getattr(profiling, "ProfileMode", None)
    if modes is not None:
        facts["profile_modes"] = [m for m in dir(modes) if m.isupper()]
    try:
        facts["neuron_available"] = bool(torch.neuron.is_available())
    except Exception as exc:
        facts["neuron_available_error"] = f"{type(exc).__name__}: {exc}"


def probe_xla(facts):
    """torch-xla (the XLA flavour of torch-neuronx on Trn1, or any torch-xla)."""
    if importlib.util.find_spec("torch_xla") is None:
        return
    facts["torch_xla"] = _version("torch-xla") or _version("torch_xla") or "installed"
    facts["xla_debug_env"] = {
        k: os.environ.get(k) for k in ("XLA_IR_DEBUG", "XLA_HLO_DEBUG", "NEURON_FRAMEWORK_DEBUG")
    }
    try:
        torch_xla = importlib.import_module("torch_xla")
    except Exception as exc:
        facts["torch_xla_error"] = f"{type(exc).__name__}: {exc}"
        return
    facts["xla_ir_debug_api"] = hasattr(getattr(torch_xla, "_XLAC", None), "_set_ir_debug")


CORE_KEYS = ("nc_count", "neuroncore_count", "neuron_cores", "cores")


def _devices(doc):
    """The device records of either neuron-ls JSON: a list of devices
    (``--json-output``, up to Neuron 2.33) or an object with top-level fields
    and a device list (``--output-format json``, Neuron 2.34+)."""
    if isinstance(doc, list):
        return [d for d in doc if isinstance(d, dict)]
    if isinstance(doc, dict):
        for value in doc.values():
            if (
                isinstance(value, list)
                and value
                and all(isinstance(d, dict) for d in value)
                and any(k in value[0] for k in CORE_KEYS)
            ):
                return value
    return []


def _cores(device):
    for key in CORE_KEYS:
        value = device.get(key)
        if isinstance(value, int):
            return value
        if isinstance(value, list):
            return len(value)
    return 0


def probe_devices(facts):
    tool = _tool("neuron-ls")
    facts["neuron_ls"] = tool
    try:
        facts["dev_neuron"] = sorted(n for n in os.listdir("/dev") if n.startswith("neuron"))
    except OSError:
        facts["dev_neuron"] = []
    if not tool:
        return
    error = None
    for flags in (["--output-format", "json"], ["--json-output"]):  # 2.34+, then older
        try:
            out = subprocess.run(
                [tool] + flags, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL
            )
            if out.returncode != 0:
                error = (out.stderr.strip().splitlines() or [f"exit {out.returncode}"])[-1]
                continue
            doc = json.loads(out.stdout)
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            continue
        devices = _devices(doc)
        facts["neuron_devices"] = len(devices)
        facts["neuron_cores"] = sum(_cores(d) for d in devices)
        if isinstance(doc, dict):
            for key in ("instance_type", "instance-type"):
                if isinstance(doc.get(key), str):
                    facts["neuron_ls_instance_type"] = doc[key]
        return
    facts["neuron_ls_error"] = error


def probe_host(facts, work_dir):
    try:
        usage = shutil.disk_usage(work_dir)
        facts["disk_free"] = usage.free
    except OSError as exc:
        facts["disk_error"] = str(exc)
    for name in ("product_name", "sys_vendor"):
        try:
            with open("/sys/devices/virtual/dmi/id/" + name) as handle:
                facts[name] = handle.read().strip()
        except OSError:
            pass
    facts["neuron_explorer"] = _tool("neuron-explorer")
    if facts["neuron_explorer"]:
        facts["neuron_explorer_schema"] = _profile_schema(facts["neuron_explorer"])


SCHEMA_VERSION = re.compile(r"^\s*version:\s*['\"]?(\d+\.\d+\.\d+)", re.M)


def _profile_schema(tool):
    """The profile schema version neuron-explorer writes: its OpenAPI schema (YAML)
    carries it. ``view --show-profile-schema`` from SDK 2.33, ``--show-profile-schema``
    before (docs/neuron.md)."""
    for args in (["view", "--show-profile-schema"], ["--show-profile-schema"]):
        try:
            out = subprocess.run(
                [tool] + args, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL
            )
        except Exception:
            continue
        found = SCHEMA_VERSION.search(out.stdout or "") if out.returncode == 0 else None
        if found:
            return found.group(1)
    return None


def main():
    work_dir = sys.argv[1] if len(sys.argv) > 1 else "."
    facts = {
        "python": sys.executable,
        "python_version": list(sys.version_info[:3]),
        "work_dir": os.path.abspath(work_dir),
    }
    probe_host(facts, work_dir)
    probe_devices(facts)
    torch = probe_torch(facts)
    if torch is not None:
        probe_neuron(facts, torch)
        probe_xla(facts)
    sys.stdout.write("\n" + json.dumps(facts) + "\n")


main()

"""``doctor``'s view of the XLA flavour (Trn1: torch-neuronx on torch-xla).

What a Trn1 user needs to know before profiling with backend ``xla``: the
torch-xla version, whether HLO metadata will carry source lines (the harness
sets ``XLA_IR_DEBUG``/``XLA_HLO_DEBUG`` itself before torch_xla loads; NEFFs
compiled earlier without them have no stack info), and whether the API the
harness relies on is there. Facts come from ``probe.probe_xla``.
"""

from __future__ import annotations

DEBUG_VARS = ("XLA_IR_DEBUG", "XLA_HLO_DEBUG")


def judge_torch_xla(facts: dict, flavour: str | None) -> tuple[str, str, str | None]:
    """(status, detail, fix) of the ``torch_xla`` row."""
    version = facts.get("torch_xla")
    if not facts.get("torch"):
        return "skip", "needs torch", None
    if not version:
        if flavour == "xla":
            return (
                "fail",
                "torch-neuronx is the XLA flavour but torch-xla is missing",
                "repair the Neuron venv (torch-neuronx 2.9 needs torch-xla 2.9)",
            )
        return "skip", "torch-xla is not installed (only Trn1's XLA flavour and --backend xla use it)", None
    if facts.get("torch_xla_error"):
        return (
            "fail",
            f"torch-xla {version} does not import: {facts['torch_xla_error']}",
            "repair the venv (or pick another)",
        )
    if not facts.get("xla_ir_debug_api"):
        return (
            "warn",
            f"torch-xla {version}: no _XLAC._set_ir_debug here; source lines depend on "
            f"XLA_IR_DEBUG/XLA_HLO_DEBUG being read at import (the harness sets them)",
            "use torch-xla 2.9 (the release this was checked against)",
        )
    env = facts.get("xla_debug_env") or {}
    shell = ", ".join(f"{k}={env[k]}" for k in DEBUG_VARS if env.get(k)) or "unset in your shell"
    neff = (
        " NEFFs compiled before with the variables unset carry no stack info: the harness "
        "compiles into a fresh cache."
        if flavour == "xla"
        else ""
    )
    return (
        "pass",
        f"torch-xla {version}: HLO metadata will carry source lines (the harness sets "
        f"{' and '.join(DEBUG_VARS)}=1 before torch_xla loads; {shell}).{neff}",
        None,
    )

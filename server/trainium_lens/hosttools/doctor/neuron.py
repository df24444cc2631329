"""``doctor``'s view of the Neuron device profile: can the host turn a capture into
Parquet tables (``neuron-explorer``, which profile schema it writes), and can this
machine read them (pyarrow, where trainium-lens itself runs). The reader takes any
schema version through the export's own SchemaFields (docs/neuron.md); the row says
which one the host writes so a user can match it with the documented 7.4.0 / 12.0.1.
Facts come from ``probe.probe_host``.
"""

from __future__ import annotations

import importlib.util
from importlib import metadata

DOCUMENTED = ("7.4.0", "12.0.1")  # SDK 2.31, SDK 2.33 (docs/neuron.md)

# The Neuron SDK a TorchNeuron install belongs to, by its torch-neuronx release
# (docs/neuron.md, "Neuron SDK releases": the 2.33 and 2.34 release notes).
SDK_BY_TORCH_NEURONX = {
    (2, 13, 3): "2.33",
    (2, 14, 3): "2.33",
    (2, 13, 3, 1): "2.34",
    (2, 14, 3, 1): "2.34",
}
KNOWN_SDKS = ("2.33", "2.34")
READER = {
    "2.33": "neuron-explorer's Parquet export (its JSON, written up to 2.33, is read too)",
    "2.34": "neuron-explorer's Parquet export (the full-profile JSON is no longer maintained from 2.34)",
}


def neuron_sdk(torch_neuronx: str | None) -> str | None:
    """The SDK release of a TorchNeuron torch-neuronx version (None: not one listed)."""
    parts = []
    for token in str(torch_neuronx or "").split("+")[0].split("."):
        if not token.isdigit():
            break
        parts.append(int(token))
    while len(parts) > 3 and parts[-1] == 0:  # 2.14.3.0 is 2.14.3
        parts.pop()
    return SDK_BY_TORCH_NEURONX.get(tuple(parts))


def judge_neuron_sdk(facts: dict, flavour: str | None) -> tuple[str, str, str | None]:
    """(status, detail, fix) of the ``neuron_sdk`` row: which SDK, and which reader."""
    version = facts.get("torch_neuronx")
    if not version:
        return "skip", "no torch-neuronx: no Neuron SDK found", None
    if flavour == "xla":
        return (
            "pass",
            f"torch-neuronx {version} is the XLA flavour (Trn1: SDK ≤ 2.29 for training); device "
            f"profiles read from {READER['2.33']}",
            None,
        )
    sdk = neuron_sdk(version)
    if sdk is None:
        return (
            "warn",
            f"torch-neuronx {version} is not a release of a Neuron SDK this tool knows "
            f"({', '.join(KNOWN_SDKS)}): its device profiles are read as Parquet through their own "
            f"SchemaFields, unchecked",
            "run docs/support.md's check on this host and send its output back",
        )
    detail = f"Neuron SDK {sdk} (torch-neuronx {version}): device profiles read from {READER[sdk]}"
    return "pass", detail, None


def judge_neuron_explorer(facts: dict, flavour: str | None, not_here: str) -> tuple[str, str, str | None]:
    """(status, detail, fix) of the ``neuron_explorer`` row."""
    path = facts.get("neuron_explorer")
    if not path:
        return (
            "fail",
            "neuron-explorer not found" + not_here,
            "install aws-neuronx-tools (it puts neuron-explorer in /opt/aws/neuron/bin)",
        )
    schema = facts.get("neuron_explorer_schema")
    if not schema:
        said = "profile schema not reported (`view --show-profile-schema` printed no version)"
    elif schema in DOCUMENTED:
        said = f"writes profile schema {schema}"
    else:
        known = ", ".join(DOCUMENTED)
        said = f"writes profile schema {schema}, read through its SchemaFields (documented: {known})"
    use = {
        "xla": "Trn1: its Parquet export gives device time per line",
        "native": "TorchNeuron: its session export gives device time per line when key_averages() has none",
    }.get(flavour or "")
    return "pass", f"{path}; {said}" + (f" ({use})" if use else ""), None


def judge_profile_reader(trainium: bool) -> tuple[str, str, str | None]:
    """(status, detail, fix) of the ``profile_reader`` row: pyarrow on this machine."""
    if importlib.util.find_spec("pyarrow") is None:
        return (
            "warn" if trainium else "skip",
            "pyarrow is not installed where trainium-lens runs: Neuron device profiles (Parquet) "
            "cannot be read here, runs keep their host figures",
            "pip install pyarrow into trainium-lens's environment" if trainium else None,
        )
    return "pass", f"pyarrow {metadata.version('pyarrow')}: reads Neuron Explorer Parquet exports here", None

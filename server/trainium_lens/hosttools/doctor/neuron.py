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

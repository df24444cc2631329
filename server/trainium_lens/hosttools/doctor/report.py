"""The doctor's report: the checks in order, each one's status, detail and fix."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

MIN_FREE_BYTES = 5 * 1024**3  # a Neuron profile plus NEFF cache easily takes GBs


NOT_TRAINIUM = "not a Trainium host"


# In the order they are shown.
CHECKS = [
    ("ssh", "SSH reachable"),
    ("host_key", "host key"),
    ("auth", "authentication"),
    ("python", "Python"),
    ("torch", "torch"),
    ("torch_neuronx", "torch-neuronx flavour"),
    ("torch_xla", "torch-xla (Trn1 path)"),
    ("profiling_api", "Neuron profiling API"),
    ("neuron_devices", "Neuron devices"),
    ("neuron_sdk", "Neuron SDK"),
    ("neuron_explorer", "neuron-explorer"),
    ("profile_reader", "Neuron profile reader (here)"),
    ("disk", "free disk in work dir"),
    ("instance_type", "instance type"),
    ("warm_worker", "warm worker"),
]


# Checks across the nodes of one job (hosttools/doctor/nodes.py): a report of their own.
NODE_CHECKS = [
    ("nodes_reachable", "every node reachable"),
    ("same_stack", "same Python and torch"),
    ("clocks", "clocks"),
    ("same_code", "same harness"),
    ("ports", "rendezvous port"),
    ("slurm", "SLURM"),
]

TITLES = dict(CHECKS + NODE_CHECKS)


@dataclass
class Check:
    name: str
    title: str
    status: str  # "pass" | "warn" | "fail" | "skip"
    detail: str
    fix: str | None = None


@dataclass
class Report:
    host: str
    checks: list[Check] = field(default_factory=list)
    facts: dict = field(default_factory=dict)  # the probe's raw answer

    @property
    def ok(self) -> bool:
        return not any(c.status == "fail" for c in self.checks)

    def get(self, name: str) -> Check | None:
        return next((c for c in self.checks if c.name == name), None)

    def to_dict(self) -> dict:
        return {
            "host": self.host,
            "ok": self.ok,
            "checks": [asdict(c) for c in self.checks],
            "facts": self.facts,
        }


def add(report: Report, name: str, status: str, detail: str, fix: str | None = None) -> None:
    report.checks.append(Check(name, TITLES[name], status, detail, fix))


def skip_rest(report: Report, reason: str) -> None:
    done = {c.name for c in report.checks} | {"warm_worker"}  # run_doctor judges it, always
    for name, _title in CHECKS:
        if name not in done:
            add(report, name, "skip", reason)

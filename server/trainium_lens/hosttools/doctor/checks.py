"""The doctor's checks: each judges one fact the probe found on a host (python,
torch, torch-neuronx and its profiling API, devices, Neuron Explorer, disk,
instance, torch-xla). ``judge`` runs them all into a ``run.Report``."""

from __future__ import annotations

from dataclasses import dataclass

from trainium_lens.hosttools.doctor.report import MIN_FREE_BYTES, NOT_TRAINIUM, Report, add, skip_rest


# -- judging -------------------------------------------------------------------------
# One named check per row of the report, in CHECKS order. Each reads the probe's
# facts and adds exactly one row; ``Facts`` holds what several of them share.
@dataclass
class Facts:
    facts: dict
    flag: str  # "--python" locally, "--remote-python" over SSH
    not_here: str  # ": not a Trainium host (...)" or ""
    flavour: str | None  # "native" | "xla" | None


def judge(report: Report, facts: dict, local: bool) -> None:
    report.facts = facts
    flag = "--python" if local else "--remote-python"
    if "probe_error" in facts:
        add(
            report,
            "python",
            "fail",
            f"the probe failed: {facts['probe_error']}",
            f"pass {flag} PATH: a working Python 3.10+",
        )
        skip_rest(report, "needs the probe")
        return
    trainium = bool(facts.get("neuron_ls") or facts.get("dev_neuron"))
    ctx = Facts(
        facts,
        flag,
        "" if trainium else f": {NOT_TRAINIUM} (no neuron-ls, no /dev/neuron*)",
        facts.get("neuron_flavour"),
    )
    for check in (
        check_python,
        check_torch,
        check_torch_neuronx,
        check_torch_xla,
        check_profiling_api,
        check_neuron_devices,
        check_neuron_explorer,
        check_disk,
        check_instance_type,
    ):
        check(report, ctx)
    if not trainium:  # off a Neuron host its checks say why they do not apply; none fails
        for c in report.checks:
            if c.name in NEURON_ONLY and c.status == "fail":
                c.status, c.fix = "skip", None


#: The checks that only a Trainium host can pass.
NEURON_ONLY = frozenset({"torch_neuronx", "profiling_api", "neuron_devices", "neuron_explorer"})


def check_python(report: Report, ctx: Facts) -> None:
    facts = ctx.facts
    version = ".".join(str(v) for v in facts.get("python_version", []))
    if tuple(facts.get("python_version", [0])) < (3, 10):
        add(
            report,
            "python",
            "fail",
            f"Python {version} at {facts['python']}: the harness needs 3.10+",
            f"pass {ctx.flag} PATH: a Python 3.10+ with torch",
        )
    else:
        add(report, "python", "pass", f"Python {version} at {facts['python']}")


def check_torch(report: Report, ctx: Facts) -> None:
    facts = ctx.facts
    if facts.get("torch"):
        add(report, "torch", "pass", f"torch {facts['torch']}")
    else:
        add(
            report,
            "torch",
            "fail",
            f"torch does not import in {facts['python']} ({facts.get('torch_error', 'not installed')})",
            f"pass {ctx.flag} PATH: the Neuron DLAMI venv (/opt/aws_neuronx_venv_pytorch_*) "
            f"or a Python with torch",
        )


def check_torch_neuronx(report: Report, ctx: Facts) -> None:
    facts = ctx.facts
    if not facts.get("torch"):
        add(report, "torch_neuronx", "skip", "needs torch")
    elif not facts.get("torch_neuronx"):
        add(
            report,
            "torch_neuronx",
            "fail",
            "torch-neuronx is not installed" + ctx.not_here,
            "use a Trn2/Trn3 host with the Neuron DLAMI (its PyTorch venv has torch-neuronx); "
            "CPU/CUDA profiling works without it",
        )
    elif facts.get("torch_neuronx_error"):
        add(
            report,
            "torch_neuronx",
            "fail",
            f"torch-neuronx {facts['torch_neuronx']} does not import: {facts['torch_neuronx_error']}",
            "repair the venv (or pick another)",
        )
    elif ctx.flavour == "native":
        add(
            report,
            "torch_neuronx",
            "pass",
            f"torch-neuronx {facts['torch_neuronx']}: native TorchNeuron (device 'neuron')",
        )
    elif ctx.flavour == "xla":
        add(
            report,
            "torch_neuronx",
            "pass",
            f"torch-neuronx {facts['torch_neuronx']}: the XLA flavour (Trn1): profiled with "
            f"backend xla (time per HLO instruction, mapped to lines by HLO metadata)",
        )
    else:
        add(
            report,
            "torch_neuronx",
            "fail",
            f"torch-neuronx {facts['torch_neuronx']} registered no 'neuron' device",
            "check the Neuron install (neuron-ls)",
        )


def check_profiling_api(report: Report, ctx: Facts) -> None:
    facts = ctx.facts
    names = facts.get("profiling_names") or {}
    params = facts.get("neuron_config_params") or []
    if ctx.flavour == "xla":
        add(
            report,
            "profiling_api",
            "skip",
            "XLA flavour: torch.profiler's Neuron API is not "
            "used; backend xla reads the torch_xla profiler and neuron-explorer instead",
        )
    elif ctx.flavour != "native":
        add(
            report,
            "profiling_api",
            "skip" if facts.get("torch_neuronx") else "fail",
            "needs native TorchNeuron" + ctx.not_here,
            None if facts.get("torch_neuronx") else "a Trn2/Trn3 host with TorchNeuron",
        )
    elif facts.get("profiling_error") or not all(names.values()):
        missing = [n for n, ok in names.items() if not ok]
        add(
            report,
            "profiling_api",
            "fail",
            "torch_neuronx.profiling: " + (facts.get("profiling_error") or f"missing {', '.join(missing)}"),
            "upgrade torch-neuronx to a release with NeuronConfig/NeuronProfiler",
        )
    else:
        correlate = "correlate_device_time" in params
        add(
            report,
            "profiling_api",
            "pass",
            f"NeuronConfig({', '.join(params[:6])}{', ...' if len(params) > 6 else ''}); "
            f"correlate_device_time {'accepted' if correlate else 'not in the signature'}; "
            f"modes {', '.join(facts.get('profile_modes') or [])}",
        )


def check_neuron_devices(report: Report, ctx: Facts) -> None:
    facts = ctx.facts
    if facts.get("neuron_devices"):
        cores = facts.get("neuron_cores")
        add(
            report,
            "neuron_devices",
            "pass",
            f"{facts['neuron_devices']} devices, "
            + (f"{cores} NeuronCores" if cores else "core count not reported")
            + " (neuron-ls)",
        )
    elif facts.get("neuron_ls_error"):
        add(
            report,
            "neuron_devices",
            "fail",
            f"neuron-ls failed: {facts['neuron_ls_error']}",
            "check the Neuron driver (aws-neuronx-dkms) and runtime",
        )
    else:
        add(
            report,
            "neuron_devices",
            "fail",
            "no Neuron devices" + (ctx.not_here or " (neuron-ls lists none)"),
            "run on a trn1/trn2/trn3 instance with the Neuron driver",
        )


def check_neuron_explorer(report: Report, ctx: Facts) -> None:
    from trainium_lens.hosttools.doctor.neuron import (
        judge_neuron_explorer,
        judge_neuron_sdk,
        judge_profile_reader,
    )

    add(report, "neuron_sdk", *judge_neuron_sdk(ctx.facts, ctx.flavour))
    add(report, "neuron_explorer", *judge_neuron_explorer(ctx.facts, ctx.flavour, ctx.not_here))
    add(report, "profile_reader", *judge_profile_reader(not ctx.not_here))


def check_disk(report: Report, ctx: Facts) -> None:
    facts = ctx.facts
    free = facts.get("disk_free")
    if free is None:
        add(
            report,
            "disk",
            "fail",
            f"cannot read free space of {facts.get('work_dir')}: {facts.get('disk_error')}",
            "pick a writable work dir (--work-dir)",
        )
    else:
        text = f"{free / 1024**3:.1f} GiB free in {facts.get('work_dir')}"
        if free < MIN_FREE_BYTES:
            add(report, "disk", "warn", text, "free space: Neuron profiles and NEFFs need GBs")
        else:
            add(report, "disk", "pass", text)


def check_instance_type(report: Report, ctx: Facts) -> None:
    facts = ctx.facts
    product = facts.get("neuron_ls_instance_type") or facts.get("product_name")
    if not product:
        add(report, "instance_type", "skip", "not readable here (no DMI product name)")
    elif product.startswith(("trn", "inf")):
        add(report, "instance_type", "pass", product)
    else:
        add(
            report,
            "instance_type",
            "warn",
            f"{product}: {NOT_TRAINIUM}",
            "Neuron profiling needs a trn1/trn2/trn3 instance",
        )


def check_torch_xla(report: Report, ctx: Facts) -> None:
    from trainium_lens.hosttools.doctor.xla import judge_torch_xla

    status, detail, fix = judge_torch_xla(ctx.facts, ctx.flavour)
    venv = xla_venv() if ctx.flag == "--python" and not ctx.facts.get("torch_xla") else None
    if venv is not None:  # not in this Python, but in the venv scripts/setup-xla.sh makes
        status, fix = "pass", None
        detail = f"torch-xla is in {venv} (not in this Python): --backend xla --python {venv}"
    add(report, "torch_xla", status, detail, fix)


def xla_venv() -> str | None:
    """The torch-xla venv this tool's own setup makes (``scripts/setup-xla.sh``:
    ``.venv-xla`` in the checkout or the current folder), when it has torch-xla."""
    from pathlib import Path

    here = Path(__file__).resolve().parents[4]  # the checkout holding server/
    for root in dict.fromkeys([Path.cwd(), here]):
        venv = root / ".venv-xla"
        if (venv / "bin" / "python").exists() and any(venv.glob("lib/python3*/site-packages/torch_xla")):
            return str(venv / "bin" / "python")
    return None

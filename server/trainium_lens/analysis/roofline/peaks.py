"""The roof of a result: peak FLOP/s per dtype and memory bandwidth of what ran,
with where each figure came from (docs/roofline.md lists them with sources).

In order of preference:

1. what the result carries: the CPU roof the harness measured on the host
   (``Result.roof`` with figures), or a Neuron device profile's ``Metadata``
   (``from_neuron_metadata``: clock × tensor-engine rows × columns × 2 per core);
2. the Neuron docs' chip figures for Trn1 / Trn2, divided by the chip's
   NeuronCores and multiplied by the cores the run used;
3. NVIDIA's datasheet figures by device name (dense, no sparsity); fp32 matmuls
   use the TF32 figure when the run allowed TF32.

No figure is invented: a device in no table has no roof, and the editor shows
FLOPs and bytes without a percentage.
"""

from __future__ import annotations

from trainium_lens.model.evidence import PeakFlops, Roof
from trainium_lens.model.result import Result

T = 1e12
G = 1e9
GIB = float(1 << 30)

# name fragment (lower case, most specific first) -> (dtype -> FLOP/s, bytes/s, tf32 FLOP/s)
# NVIDIA datasheets, dense Tensor Core figures (docs/roofline.md: sources).
CUDA: list[tuple[str, dict[str, float], float, float | None]] = [
    ("h200", {"bfloat16": 989.4 * T, "float16": 989.4 * T, "float32": 66.9 * T}, 4.8 * T, 494.7 * T),
    ("h100 pcie", {"bfloat16": 756 * T, "float16": 756 * T, "float32": 51 * T}, 2.0 * T, 378 * T),
    ("h100", {"bfloat16": 989.4 * T, "float16": 989.4 * T, "float32": 66.9 * T}, 3.35 * T, 494.7 * T),
    ("a100-sxm4-80gb", {"bfloat16": 312 * T, "float16": 312 * T, "float32": 19.5 * T}, 2.039 * T, 156 * T),
    ("a100 80gb pcie", {"bfloat16": 312 * T, "float16": 312 * T, "float32": 19.5 * T}, 1.935 * T, 156 * T),
    ("a100", {"bfloat16": 312 * T, "float16": 312 * T, "float32": 19.5 * T}, 1.555 * T, 156 * T),
    ("l40s", {"bfloat16": 362.05 * T, "float16": 362.05 * T, "float32": 91.6 * T}, 864 * G, 183 * T),
    ("l4", {"bfloat16": 121 * T, "float16": 121 * T, "float32": 30.3 * T}, 300 * G, 60 * T),
    ("v100", {"float16": 125 * T, "float32": 15.7 * T}, 900 * G, None),
    ("t4", {"float16": 65 * T, "float32": 8.1 * T}, 320 * G, None),
]

# Neuron docs (about-neuron/arch/neuron-hardware): per chip, and its NeuronCores.
NEURON = {
    "trn1": (
        "Trn1 chip (2 × NeuronCore-v2)",
        {"bfloat16": 190 * T, "float16": 190 * T, "float8_e4m3fn": 190 * T, "float32": 47.5 * T},
        820 * GIB,
        2,
    ),
    "trn2": (
        "Trn2 chip (8 × NeuronCore-v3)",
        {"bfloat16": 667 * T, "float16": 667 * T, "float8_e4m3fn": 1299 * T, "float32": 181 * T},
        2.9 * T,
        8,
    ),
}


def _cuda(name: str, tf32: bool | None) -> Roof | None:
    low = name.lower()
    for fragment, flops, bandwidth, tf32_flops in CUDA:
        if fragment in low:
            peaks = dict(flops)
            note = ""
            if tf32 and tf32_flops:
                peaks["float32"] = tf32_flops
                note = "; float32 matmuls as TF32 (allow_tf32 on)"
            return Roof(
                device=name,
                flops=[PeakFlops(d, v) for d, v in peaks.items()],
                bytes_per_s=bandwidth,
                source=f"NVIDIA datasheet for {name} (dense, no sparsity){note}",
            )
    return None


def _neuron(instance_type: str, cores: int | None) -> Roof | None:
    family = instance_type.split(".")[0].rstrip("n")  # trn1n -> trn1
    entry = NEURON.get(family)
    if entry is None:
        return None
    chip, flops, bandwidth, per_chip = entry
    used = max(1, cores or 1)
    scale = min(used, per_chip) / per_chip
    return Roof(
        device=f"{instance_type}: {min(used, per_chip)} NeuronCore(s) of a {chip}",
        flops=[PeakFlops(d, v * scale) for d, v in flops.items()],
        bytes_per_s=bandwidth * scale,
        source=(
            f"Neuron docs, {chip} figures × {min(used, per_chip)}/{per_chip} cores used "
            f"(the docs' per-core tensor-engine figure differs by a few %; a device profile's "
            f"Metadata replaces both)"
        ),
        cores=min(used, per_chip),
    )


def from_neuron_metadata(
    rows: int, cols: int, clock_ghz: float, hbm_bytes_per_s: float, cores: int = 1, device: str = ""
) -> Roof:
    """A Neuron device profile's own figures (its ``Metadata`` table): the tensor
    engine does rows × cols multiply-adds per cycle (BF16)."""
    per_core = 2.0 * rows * cols * clock_ghz * 1e9
    return Roof(
        device=device or f"{cores} NeuronCore(s)",
        flops=[PeakFlops("bfloat16", per_core * cores), PeakFlops("float16", per_core * cores)],
        bytes_per_s=hbm_bytes_per_s,
        source=f"device profile Metadata: {rows}×{cols} tensor engine at {clock_ghz:g} GHz × 2 per core",
        cores=cores,
    )


def resolve(result: Result) -> Roof | None:
    """The roof this result's lines are measured against, or None (not known)."""
    roof = result.roof
    if roof is not None and roof.flops and roof.bytes_per_s:
        return roof
    env = result.environment
    if result.backend == "cuda":
        return _cuda((roof.device if roof else "") or env.device_name or "", roof.tf32 if roof else None)
    # xla: Neuron peaks only for device time (clock ``neuron``), never for host time per instruction
    on_device = result.backend == "neuron" or (result.backend == "xla" and result.clock == "neuron")
    if on_device and env.instance_type:
        return _neuron(env.instance_type, env.neuron_cores if result.backend == "neuron" else 1)
    return None


def peak_for(roof: Roof, dtype: str | None) -> tuple[float, str]:
    """Peak FLOP/s for a dtype and the dtype whose figure it is (float32's when the
    roof has none for it: said beside the figure)."""
    by = {p.dtype: p.flops_per_s for p in roof.flops}
    if dtype and dtype in by:
        return by[dtype], dtype
    if "float32" in by:
        return by["float32"], "float32"
    best = max(roof.flops, key=lambda p: p.flops_per_s)
    return best.flops_per_s, best.dtype

"""Work per line on CPU with the real profiler (harness/work/): FLOPs exact for
known shapes, forward and backward; allocation and saved bytes within 10% of
the tensors' sizes (measured here, independently); a model step's FLOPs equal
to torch's own FlopCounterMode; the roof measured on this host and stated."""

from __future__ import annotations

import json
import sys

import pytest
import torch
from torch.utils import flop_counter

from tests.conftest import DATA, ROOT
from tests.support.harness import line_of, run_harness
from trainium_lens.analysis.roofline.peaks import resolve
from trainium_lens.analysis.roofline.points import line_roofs
from trainium_lens.model.result import Batch

WORK = DATA / "work.py"
sys.path.insert(0, str(DATA))
import work as fixture  # noqa: E402  (the profiled file itself, run here for the independent figures)

M, K, N = fixture.M, fixture.K, fixture.N
F32 = 4


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("work")
    # the roof measured in this run's own cache (not the tests' shared one)
    env = {"OMP_NUM_THREADS": "1", "TRAINIUM_LENS_CACHE": str(tmp / "cache"), "TRAINIUM_LENS_ROOF": ""}
    code, events, stderr = run_harness(ROOT, "tests/data/work.py", tmp / "run", env=env)
    assert code == 0, stderr[-3000:] + json.dumps(events[-2:])
    batch = Batch.from_dict(json.loads((tmp / "run" / "batch.json").read_text()))
    stages = [e.get("message", "") for e in events if e["event"] == "stage" and e["stage"] == "work"]
    return {r.function.name: r for r in batch.results}, stages, tmp / "cache"


def _line(result, needle: str):
    stat = result.line("tests/data/work.py", line_of(WORK, needle))
    assert stat is not None, needle
    return stat


def test_matmul_flops_are_exact_forward_and_backward(results):
    r = results[0]["matmul_both"]
    s = _line(r, "y = x @ w")
    assert s.flops == 2 * M * N * K
    assert s.backward_flops == 4 * M * N * K  # grad x and grad w: two mm of the same size
    assert s.dtype == "float32"
    # the estimate's definition: inputs x, w + output y
    assert s.bytes == pytest.approx((M * K + K * N + M * N) * F32)
    assert r.schema_version == 3 and r.work is not None and r.work.source == "shapes"


def test_backward_flops_follow_which_inputs_need_grad(results):
    s = _line(results[0]["relu_step"], "h = torch.relu(x @ w)")
    assert s.flops == 2 * M * N * K
    assert s.backward_flops == 2 * M * N * K  # x needs no grad: only grad w


def _saved_here() -> tuple[int, int]:
    """The storages autograd saves in relu_step's forward line, measured in this process."""
    x, w = fixture.weight_grad()
    seen: dict[int, int] = {}

    def pack(t):
        st = t.untyped_storage()
        seen.setdefault(st.data_ptr(), st.nbytes())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        h = torch.relu(x @ w)
    del h
    return sum(seen.values()), len(seen)


def test_saved_bytes_of_the_relu_line(results):
    s = _line(results[0]["relu_step"], "h = torch.relu(x @ w)")
    saved, count = _saved_here()
    assert count == 2  # x (for grad w) and h (relu's result); w is not needed
    assert s.saved_bytes == pytest.approx(saved, rel=0.10)
    assert s.saved_bytes == pytest.approx((M * K + M * N) * F32, rel=0.10)
    # x is an input (held before the step); h was made in it: an activation
    assert s.saved_activation_bytes == pytest.approx(M * N * F32, rel=0.10)


def test_a_line_that_allocates_a_known_tensor(results):
    r = results[0]["allocates"]
    s = _line(r, "big = torch.zeros(1024, 512)")
    assert s.alloc_bytes == pytest.approx(1024 * 512 * F32, rel=0.10)
    assert s.peak_bytes == pytest.approx(1024 * 512 * F32, rel=0.10)  # live at the peak
    assert r.memory is not None and r.memory.available
    assert r.memory.peak_bytes >= 1024 * 512 * F32
    # reached by the line after it (its 4-byte sum), while the zeros are live
    assert r.memory.peak_line == line_of(WORK, "return big.sum()")


def test_a_model_step_matches_torchs_flop_counter(results):
    """Conv, linear and attention, forward, checkpoint recompute and backward: the
    sum over the lines equals FlopCounterMode's count of the same step (CPU
    attention kernels added with torch's own attention formulas, which its
    registry lacks for the CPU kernels)."""
    r = results[0]["conv_attention"]
    aten = torch.ops.aten

    def raw(f):
        f._get_raw = True
        return f

    mapping = {
        aten._scaled_dot_product_flash_attention_for_cpu: raw(flop_counter.sdpa_flop),
        aten._scaled_dot_product_flash_attention_for_cpu_backward: raw(flop_counter.sdpa_backward_flop),
    }
    with flop_counter.FlopCounterMode(display=False, custom_mapping=mapping) as counter:
        fixture.conv_attention(*fixture.make_net())
    expected = counter.get_total_flops()
    assert r.work.flops == expected and r.work.unattributed_flops == 0
    assert sum((s.flops or 0) + (s.backward_flops or 0) for s in r.lines) == expected
    conv = _line(r, 'c = net["conv"](img)')
    assert conv.flops and conv.backward_flops == conv.flops  # grad weight only: input needs none
    attn = _line(r, "a = F.scaled_dot_product_attention")
    b, s_, d = 2, 10, 16  # batch × 1 head, sequence, head dim
    forward = 2 * b * s_ * s_ * d + 2 * b * s_ * s_ * d  # q @ kᵀ, then scores @ v
    assert attn.flops == forward
    # checkpoint's recompute runs inside the backward and counts with it
    assert attn.backward_flops == forward + 2 * b * s_ * s_ * (3 * d + 2 * d)


def test_cpu_percent_of_peak_comes_from_the_measured_host_peak(results):
    by_name, stages, cache = results
    r = by_name["matmul_both"]
    roof = resolve(r)
    assert roof is r.roof and roof.measured and "measured on this host" in roof.source
    assert roof.device.startswith(fixture_cpu_model())
    assert (cache / "cpu-roof.json").exists()  # measured once, kept for the next run
    peak = {p.dtype: p.flops_per_s for p in roof.flops}["float32"]
    (fwd, bwd) = line_roofs(r, _line(r, "y = x @ w"))
    assert fwd.peak_flops == peak
    assert fwd.flops_pct == pytest.approx(100 * fwd.flops / (fwd.time_us * 1e-6) / peak)
    assert any("peak" in m for m in stages)


def fixture_cpu_model() -> str:
    from trainium_lens.harness.work.calibrate import cpu_model

    return cpu_model()

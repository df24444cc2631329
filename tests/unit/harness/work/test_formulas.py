"""FLOP formulas on recorded shapes against torch.utils.flop_counter's own formula
functions, with output shapes from torch itself (meta tensors: shapes, no compute)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.utils import flop_counter as fc

from trainium_lens.harness.work import formulas

META = {"device": "meta"}


@pytest.mark.parametrize("m,k,n", [(96, 64, 80), (1, 7, 3), (512, 256, 1)])
def test_matmuls(m, k, n):
    assert formulas.flops("aten::mm", [[m, k], [k, n]]) == fc.mm_flop([m, k], [k, n]) == 2 * m * n * k
    assert formulas.flops("aten::addmm", [[n], [m, k], [k, n], [], []]) == fc.addmm_flop([n], [m, k], [k, n])
    b = 5
    assert formulas.flops("aten::bmm", [[b, m, k], [b, k, n]]) == fc.bmm_flop([b, m, k], [b, k, n])
    assert formulas.flops("aten::baddbmm", [[b, m, n], [b, m, k], [b, k, n]]) == 2 * b * m * n * k
    assert formulas.flops("aten::mv", [[m, k], [k]]) == 2 * m * k
    assert formulas.flops("aten::dot", [[k], [k]]) == 2 * k


@pytest.mark.parametrize(
    "x,w,stride,padding,dilation,groups",
    [
        ((2, 3, 12, 12), (8, 3, 3, 3), 1, 1, 1, 1),
        ((1, 4, 17, 9), (6, 2, 3, 2), 2, 0, 1, 2),
        ((3, 8, 20), (8, 1, 5), 1, 2, 2, 8),
        ((1, 2, 5, 6, 7), (4, 2, 3, 3, 3), 1, 1, 1, 1),
    ],
)
def test_convolution_forward_and_backward(x, w, stride, padding, dilation, groups):
    n = len(x) - 2
    conv = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[n]
    out = conv(torch.empty(x, **META), torch.empty(w, **META), None, stride, padding, dilation, groups)
    lists = [[stride] * n, [padding] * n, [dilation] * n]
    shapes = [list(x), list(w), [], [], [], [], [], [], []]
    concrete = [None, None, None, *lists, False, [0] * n, groups]
    # torch's formulas are wrapped to take the output itself (``out_val``) and read its shape
    expected = fc.conv_flop(list(x), list(w), None, None, None, None, False, out_val=out)
    assert formulas.flops("aten::convolution", shapes, concrete) == expected
    grad = [list(out.shape), list(x), list(w)] + [[]] * 8
    for mask in ([True, True, False], [False, True, True], [True, False, False]):
        bconcrete = [None, None, None, [w[0]], *lists, False, [0] * n, groups, mask]
        grads = [torch.empty(x, **META), torch.empty(w, **META), None]
        torch_count = fc.conv_backward_flop(
            list(out.shape), list(x), list(w), None, None, None, None, False, None, None, mask, out_val=grads
        )
        ours = formulas.flops("aten::convolution_backward", grad, bconcrete)
        if groups == 1:  # torch's grad-weight term assumes one group (it uses every input channel)
            assert ours == torch_count
        assert ours == expected * sum(mask[:2])


def test_transposed_convolution_counts_input_points():
    x, w = [2, 4, 7, 7], [4, 3, 3, 3]
    shapes, concrete = [x, w] + [[]] * 7, [None, None, None, [2, 2], [1, 1], [1, 1], True, [1, 1], 1]
    out = F.conv_transpose2d(
        torch.empty(x, **META), torch.empty(w, **META), stride=2, padding=1, output_padding=1
    )
    expected = fc.conv_flop(x, w, None, None, None, None, True, out_val=out)
    assert formulas.flops("aten::convolution", shapes, concrete) == expected


@pytest.mark.parametrize("q,k", [((2, 4, 10, 8), (2, 4, 12, 8)), ((1, 8, 16, 32), (1, 2, 16, 32))])
def test_attention_forward_and_backward(q, k):
    v = k
    assert formulas.flops(
        "aten::_scaled_dot_product_flash_attention_for_cpu", [q, k, v]
    ) == fc.sdpa_flop_count(q, k, v)
    back = formulas.flops("aten::_scaled_dot_product_efficient_attention_backward", [q, q, k, v, q, []])
    assert back == fc.sdpa_backward_flop_count(q, q, k, v)


def test_no_formula_or_unreadable_shapes():
    assert formulas.flops("aten::add", [[4, 4], [4, 4]]) is None
    assert formulas.flops("aten::mm", [[], []]) is None  # shapes not recorded
    assert formulas.flops("aten::mm", None) is None
    assert formulas.flops("aten::convolution", [[2, 3], [4]]) is None


def test_in_place():
    assert formulas.in_place("aten::add_") and formulas.in_place("aten::_foreach_mul_")
    assert not formulas.in_place("aten::add") and not formulas.in_place("aten::__and__")

"""FLOPs of one ATen op from the shapes the profiler recorded (``record_shapes``).

The formulas are those of ``torch.utils.flop_counter`` (the counter behind
``FlopCounterMode``), written on the recorded shapes so that the profiler's
events feed them: a multiply-add is 2 FLOPs; only matmul-like ops count
(``mm``, ``addmm``, ``bmm``, ``baddbmm``, ``mv``, ``dot``, convolution,
scaled-dot-product attention, and the backward ops of the last two). Everything
else (elementwise, reductions, copies) is 0 FLOPs by this definition, as in
torch's counter and in MFU: its cost shows as bytes moved instead.

The backward of a matmul runs as two ``mm`` ops (grad input, grad weight) and is
counted there; convolution and attention have fused backward ops, counted here.
An op nested inside another op with a formula is not counted again (the caller
applies that rule: ``aten::scaled_dot_product_attention`` wraps its kernel).
Shapes come as the profiler lists them: one list per argument, ``[]`` for a
non-tensor (or a 0-d tensor); ``concrete`` holds the non-tensor arguments.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from math import prod
from typing import Any

Shapes = Sequence[Sequence[int]]


def _mm(a: Sequence[int], b: Sequence[int]) -> int:
    m, k = a[-2], a[-1]
    return 2 * m * k * b[-1]


def _bmm(a: Sequence[int], b: Sequence[int]) -> int:
    batch, m, k = a[-3], a[-2], a[-1]
    return 2 * batch * m * k * b[-1]


def mm(shapes: Shapes, concrete: Sequence[Any]) -> int | None:
    a, b = shapes[0], shapes[1]
    return _mm(a, b) if len(a) == 2 and len(b) == 2 else None


def addmm(shapes: Shapes, concrete: Sequence[Any]) -> int | None:
    return mm(shapes[1:], concrete[1:])


def bmm(shapes: Shapes, concrete: Sequence[Any]) -> int | None:
    a, b = shapes[0], shapes[1]
    return _bmm(a, b) if len(a) == 3 and len(b) == 3 else None


def baddbmm(shapes: Shapes, concrete: Sequence[Any]) -> int | None:
    return bmm(shapes[1:], concrete[1:])


def addbmm(shapes: Shapes, concrete: Sequence[Any]) -> int | None:
    return bmm(shapes[1:], concrete[1:])  # the batch is summed over: same multiply-adds


def mv(shapes: Shapes, concrete: Sequence[Any]) -> int | None:
    a, v = shapes[0], shapes[1]
    return 2 * a[0] * a[1] if len(a) == 2 and len(v) == 1 else None


def addmv(shapes: Shapes, concrete: Sequence[Any]) -> int | None:
    return mv(shapes[1:], concrete[1:])


def dot(shapes: Shapes, concrete: Sequence[Any]) -> int | None:
    a = shapes[0]
    return 2 * a[0] if len(a) == 1 else None


def _arg(concrete: Sequence[Any], i: int, default: Any) -> Any:
    value = concrete[i] if i < len(concrete) else None
    return default if value is None else value


def _spatial(value: Any, n: int, default: int) -> list[int]:
    if isinstance(value, int):
        return [value] * n
    if isinstance(value, (list, tuple)) and value:
        return [int(v) for v in value] if len(value) == n else [int(value[0])] * n
    return [default] * n


def _conv_forward(
    x: Sequence[int], w: Sequence[int], out_spatial: Sequence[int] | None, transposed: bool
) -> int:
    """2 × batch × (output points; input points if transposed) × weight elements.

    The weight is (c_out, c_in / groups, *kernel) — (c_in, c_out / groups, *kernel)
    when transposed — so ``prod(w)`` already divides by the groups."""
    points = prod(x[2:]) if transposed else prod(out_spatial or [])
    return 2 * x[0] * points * prod(w)


def convolution(shapes: Shapes, concrete: Sequence[Any]) -> int | None:
    """``aten::convolution(input, weight, bias, stride, padding, dilation, transposed,
    output_padding, groups)``; the output size follows from the arguments."""
    x, w = shapes[0], shapes[1]
    if len(x) < 3 or len(w) != len(x):
        return None
    n = len(x) - 2
    transposed = bool(_arg(concrete, 6, False))
    if transposed:
        return _conv_forward(x, w, None, True)
    stride = _spatial(_arg(concrete, 3, 1), n, 1)
    padding = _spatial(_arg(concrete, 4, 0), n, 0)
    dilation = _spatial(_arg(concrete, 5, 1), n, 1)
    out = [
        (size + 2 * p - d * (k - 1) - 1) // s + 1
        for size, k, s, p, d in zip(x[2:], w[2:], stride, padding, dilation, strict=True)
    ]
    return _conv_forward(x, w, out, False)


def convolution_backward(shapes: Shapes, concrete: Sequence[Any]) -> int | None:
    """``aten::convolution_backward(grad_output, input, weight, bias_sizes, stride,
    padding, dilation, transposed, output_padding, groups, output_mask)``: each of
    grad input and grad weight costs what the forward did (flop_counter's
    ``conv_backward_flop``); ``output_mask`` says which were asked for."""
    grad_out, x, w = shapes[0], shapes[1], shapes[2]
    if len(x) < 3 or len(w) != len(x) or len(grad_out) != len(x):
        return None
    transposed = bool(_arg(concrete, 7, False))
    forward = _conv_forward(x, w, grad_out[2:], transposed)
    mask = _arg(concrete, 10, [True, True, True])
    wanted = sum(1 for m in list(mask)[:2] if m) if isinstance(mask, (list, tuple)) else 2
    return forward * wanted


def _attention_dims(q: Sequence[int], k: Sequence[int], v: Sequence[int]) -> tuple[int, int, int, int, int]:
    """(batch × query heads, query length, key length, head dim, value head dim);
    grouped-query attention: key/value heads broadcast to the query's."""
    return prod(q[:-2]), q[-2], k[-2], q[-1], v[-1]


def attention(shapes: Shapes, concrete: Sequence[Any]) -> int | None:
    """scores = q @ kᵀ, out = scores @ v (flop_counter's ``sdpa_flop_count``)."""
    q, k, v = shapes[0], shapes[1], shapes[2]
    if min(len(q), len(k), len(v)) < 3:
        return None
    b, sq, sk, d, dv = _attention_dims(q, k, v)
    return 2 * b * sq * sk * d + 2 * b * sq * sk * dv


def attention_backward(shapes: Shapes, concrete: Sequence[Any]) -> int | None:
    """``(grad_out, q, k, v, ...)``: the scores recomputed, grad scores and grad v,
    grad q and grad k (flop_counter's ``sdpa_backward_flop_count``)."""
    q, k, v = shapes[1], shapes[2], shapes[3]
    if min(len(q), len(k), len(v)) < 3:
        return None
    b, sq, sk, d, dv = _attention_dims(q, k, v)
    return 2 * b * sq * sk * (3 * d + 2 * dv)


Formula = Callable[[Shapes, Sequence[Any]], "int | None"]

FORMULAS: dict[str, Formula] = {
    "aten::mm": mm,
    "aten::addmm": addmm,
    "aten::_addmm_activation": addmm,
    "aten::_scaled_mm": mm,
    "aten::bmm": bmm,
    "aten::baddbmm": baddbmm,
    "aten::addbmm": addbmm,
    "aten::mv": mv,
    "aten::addmv": addmv,
    "aten::dot": dot,
    "aten::vdot": dot,
    "aten::convolution": convolution,
    "aten::_convolution": convolution,
    "aten::convolution_overrideable": convolution,
    "aten::convolution_backward": convolution_backward,
    "aten::convolution_backward_overrideable": convolution_backward,
    "aten::scaled_dot_product_attention": attention,
    "aten::_scaled_dot_product_attention_math": attention,
    "aten::_scaled_dot_product_flash_attention": attention,
    "aten::_scaled_dot_product_flash_attention_for_cpu": attention,
    "aten::_scaled_dot_product_efficient_attention": attention,
    "aten::_scaled_dot_product_cudnn_attention": attention,
    "aten::_scaled_dot_product_fused_attention_overrideable": attention,
    "aten::_scaled_dot_product_flash_attention_backward": attention_backward,
    "aten::_scaled_dot_product_flash_attention_for_cpu_backward": attention_backward,
    "aten::_scaled_dot_product_efficient_attention_backward": attention_backward,
    "aten::_scaled_dot_product_cudnn_attention_backward": attention_backward,
    "aten::_scaled_dot_product_fused_attention_overrideable_backward": attention_backward,
}


def flops(name: str, shapes: Shapes | None, concrete: Sequence[Any] | None = None) -> int | None:
    """FLOPs of one call of op ``name``; None: no formula, or shapes it cannot read."""
    formula = FORMULAS.get(name)
    if formula is None or not shapes:
        return None
    try:
        return formula(shapes, concrete or [])
    except (IndexError, TypeError, ValueError):
        return None


def in_place(name: str) -> bool:
    """``aten::add_``, ``aten::copy_``: the op writes one of its inputs."""
    op = name.rpartition("::")[2]
    return op.endswith("_") and not op.endswith("__")

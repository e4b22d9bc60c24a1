"""Fused ops: one node with a hand-written backward where the composition is slow (issue 18).

`glassllm.layers.rms_norm` composed from autograd's ops records six nodes per call (x·x,
the sum, the division, +eps, the power, two products), each with a pass over x in the
backward; `rms_norm` computes it as one node with the closed-form backward.

`glassllm.layers.attention` composed from the primitives of `glassllm.autograd` records
about ten nodes per call: a transpose of k, the scaling, the mask, the softmax, two
products and `repeat_kv`, which copies every key and value head H/Hkv times (and sums
those copies again in the backward). `causal_attention` computes the same math as one
node, and never copies a key/value head: the H/Hkv query heads that share a key/value
head are stacked into one matrix, so one product serves them all.

The composed forms stay in the code (`causal_attention_composed`, `rms_norm_composed`):
they are the reference. `tests/test_fused.py` checks that both give the same values and
gradients, and runs the gradient checker on the fused ones.

Shape letters (STYLE.md): B batch · n sequence length · H query heads · Hkv key/value
heads · dk head dimension; r = H / Hkv query heads per key/value head.
"""

from __future__ import annotations

import math

import numpy as np

from glassllm.autograd import (
    masked_fill,
    matmul,
    pow,
    repeat_kv,
    softmax,
    softmax_np,
    transpose,
    tsum,
)
from glassllm.tensor import Tensor

__all__ = ["causal_attention", "causal_attention_composed", "rms_norm", "rms_norm_composed"]


def _check(q: Tensor, k: Tensor, v: Tensor) -> tuple[int, int, int, int, int]:
    """(B, H, Hkv, n, dk) of q (B, H, n, dk), k and v (B, Hkv, n, dk); ValueError otherwise."""
    if q.ndim != 4 or k.shape != v.shape or k.ndim != 4:
        raise ValueError(
            "causal_attention: q must be (B, H, n, dk) and k, v the same (B, Hkv, n, dk), "
            f"got q {q.shape}, k {k.shape}, v {v.shape}"
        )
    B, H, n, dk = q.shape
    if k.shape[0] != B or k.shape[2:] != (n, dk) or k.shape[1] < 1 or H % k.shape[1]:
        raise ValueError(
            f"causal_attention: k and v {k.shape} must be (B, Hkv, n, dk) with Hkv "
            f"dividing H, for q {q.shape}"
        )
    return B, H, k.shape[1], n, dk


def causal_attention(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
    """Causal grouped-query attention as one node: out = softmax(q·kᵀ/√dk, future = −inf)·v.

    Query head h reads key/value head h // r (r = H/Hkv adjacent query heads per
    key/value head, the order of `repeat_kv`). The r query heads of a group are stacked
    into one (r·n, dk) matrix, so each product is one per key/value head and no key or
    value is copied.

    Shapes: q (B, H, n, dk); k, v (B, Hkv, n, dk); out (B, H, n, dk).
    With qg = q grouped (B, Hkv, r·n, dk), p = softmax(mask(qg·kᵀ/√dk)) (B, Hkv, r·n, n):

    Backward:
        v: pᵀ·g                      (summed over the r heads of a group by the product)
        q: ds·k/√dk, with dp = g·vᵀ and ds = p * (dp − Σ_j dp·p)  (softmax's backward)
        k: dsᵀ·qg/√dk

    Raises: ValueError when the shapes are not as above (names all three).

    Example:
        >>> rng = np.random.default_rng(0)
        >>> q = Tensor(rng.normal(size=(1, 2, 3, 4)))  # B=1, H=2, n=3, dk=4
        >>> k, v = Tensor(rng.normal(size=(1, 1, 3, 4))), Tensor(rng.normal(size=(1, 1, 3, 4)))
        >>> ref = causal_attention_composed(q, k, v).data
        >>> bool(np.allclose(causal_attention(q, k, v).data, ref, rtol=0, atol=1e-13))
        True

    SPEC L6, L7 (the math of `attention`); Vaswani et al. 2017; Ainslie et al. 2023 (GQA).
    """
    B, H, hkv, n, dk = _check(q, k, v)
    r = H // hkv
    root_dk = math.sqrt(dk)  # divided by, as the composed form does: the same rounding
    qg = q.data.reshape(B, hkv, r * n, dk)  # (B, Hkv, r·n, dk): the group's heads stacked
    k_data, v_data = k.data, v.data
    future = np.tile(np.triu(np.ones((n, n), dtype=bool), k=1), (r, 1))  # (r·n, n)
    scores = np.matmul(qg, np.swapaxes(k_data, -1, -2))  # (B, Hkv, r·n, n)
    scores /= root_dk
    np.copyto(scores, -np.inf, where=future)
    p = softmax_np(scores, axis=-1)  # (B, Hkv, r·n, n)
    out = np.matmul(p, v_data).reshape(B, H, n, dk)  # (B, H, n, dk)

    def backward(g: np.ndarray):
        gg = g.reshape(B, hkv, r * n, dk)  # (B, Hkv, r·n, dk)
        gv = np.matmul(np.swapaxes(p, -1, -2), gg) if v.requires_grad else None  # (B, Hkv, n, dk)
        if not (q.requires_grad or k.requires_grad):
            return None, None, gv
        ds = np.matmul(gg, np.swapaxes(v_data, -1, -2))  # dp (B, Hkv, r·n, n)
        ds -= np.sum(ds * p, axis=-1, keepdims=True)
        ds *= p
        ds /= root_dk  # masked entries have p = 0, so ds = 0 there
        gq = np.matmul(ds, k_data).reshape(B, H, n, dk) if q.requires_grad else None
        gk = np.matmul(np.swapaxes(ds, -1, -2), qg) if k.requires_grad else None
        return gq, gk, gv

    return Tensor._make(out, (q, k, v), "causal_attention", backward)


def causal_attention_composed(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
    """The same math as `causal_attention`, composed from autograd's primitives (the reference).

    Shapes: q (B, H, n, dk); k, v (B, Hkv, n, dk); out (B, H, n, dk).

    Backward: by the chain rule through repeat_kv, transpose, matmul, masked_fill, softmax.
    """
    _, H, hkv, n, dk = _check(q, k, v)
    k = repeat_kv(k, H // hkv)  # (B, H, n, dk)
    v = repeat_kv(v, H // hkv)  # (B, H, n, dk)
    scores = matmul(q, transpose(k, (0, 1, 3, 2))) / math.sqrt(dk)  # (B, H, n, n)
    future = np.triu(np.ones((n, n), dtype=bool), k=1)  # (n, n): True above the diagonal
    return matmul(softmax(masked_fill(scores, future, -np.inf), axis=-1), v)  # (B, H, n, dk)


def rms_norm(x: Tensor, weight: Tensor, eps: float = 1e-6) -> Tensor:
    """RMSNorm as one node: out = x · r · weight, with r = 1/sqrt(mean(x², last axis) + eps).

    Shapes: x (..., d); weight (d,); out (..., d). The caller (`layers.rms_norm`) has
    checked the shapes.

    Backward, with y = x·r (the normalised x) and gy = g·weight:
        x: r · (gy − y · mean(gy·y, last axis))
        weight: sum over leading axes of g·y
        eps: not differentiable (L0.6)

    Example:
        >>> x, w = Tensor([[3.0, 4.0]]), Tensor([1.0, 2.0])
        >>> bool(np.array_equal(rms_norm(x, w).data, rms_norm_composed(x, w).data))
        True

    SPEC L7. Zhang & Sennrich 2019, "Root Mean Square Layer Normalization".
    """
    x_data, w_data = x.data, weight.data
    d = x_data.shape[-1]
    # the composed form's operations in its order, so the forward is the same bit for bit
    inv_rms = 1.0 / np.sqrt(np.sum(x_data * x_data, axis=-1, keepdims=True) / d + eps)
    y = x_data * inv_rms  # (..., d)
    out = y * w_data  # (..., d)

    def backward(g: np.ndarray):
        gw = np.sum(g * y, axis=tuple(range(g.ndim - 1))) if weight.requires_grad else None
        gx = None
        if x.requires_grad:
            gy = g * w_data  # (..., d)
            gx = gy - y * (np.sum(gy * y, axis=-1, keepdims=True) / d)
            gx *= inv_rms
        return gx, gw

    return Tensor._make(out, (x, weight), "rms_norm", backward)


def rms_norm_composed(x: Tensor, weight: Tensor, eps: float = 1e-6) -> Tensor:
    """The same math as `rms_norm`, composed from autograd's ops (the reference).

    Shapes: x (..., d); weight (d,); out (..., d).

    Backward: by the chain rule through mul, tsum, div, add, pow.
    """
    d = x.shape[-1]
    mean_square = tsum(x * x, axis=-1, keepdims=True) / d  # (..., 1)
    inv_rms = pow(mean_square + eps, -0.5)  # (..., 1)
    return x * inv_rms * weight  # (..., d)

"""Fused ops: one node with a hand-written backward where the composition is slow (issue 18).

`glassllm.layers.rms_norm` composed from autograd's ops records six nodes per call (x·x,
the sum, the division, +eps, the power, two products), each with a pass over x in the
backward; `rms_norm` computes it as one node with the closed-form backward.

`glassllm.layers.swiglu` composed from autograd's ops records five nodes per call (two
products, silu, the gating product, the down product); silu alone makes four temporary
arrays in its backward. `swiglu` computes it as one node: the backward reuses silu(a)
from the forward and works in place on the arrays it makes.

The core of `glassllm.layers.attention` composed from the primitives of
`glassllm.autograd` records about ten nodes per call: a transpose of k, the scaling, the
mask, the softmax, two products and `repeat_kv`, which copies every key and value head
H/Hkv times (and sums those copies again in the backward). `causal_attention` computes
the same math as one node, and never copies a key/value head: the H/Hkv query heads that
share a key/value head are stacked into one matrix, so one product serves them all.
`attention` is the whole layer as one node (the projections, rope, that core, the merge
of the heads and the output projection: fourteen nodes composed); its backward computes
x's gradient through the three projections as one product.

The composed forms stay in the code (`attention_composed`, `causal_attention_composed`,
`rms_norm_composed`, `swiglu_composed`): they are the reference. `tests/test_fused.py`
checks that both give the same values and gradients, and runs the gradient checker on the
fused ones.

Shape letters (STYLE.md): B batch · n sequence length · H query heads · Hkv key/value
heads · dk head dimension; r = H / Hkv query heads per key/value head; d model width ·
F feed-forward width · N rows (every leading axis of x flattened).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from glassllm.autograd import (
    _as_complex_pairs,
    _rotation,
    _scale_rows,
    _sigmoid_data,
    masked_fill,
    matmul,
    pow,
    repeat_kv,
    reshape,
    rope,
    silu,
    softmax,
    softmax_np,
    transpose,
    tsum,
)
from glassllm.tensor import Tensor

__all__ = [
    "attention",
    "attention_composed",
    "causal_attention",
    "causal_attention_composed",
    "rms_norm",
    "rms_norm_composed",
    "swiglu",
    "swiglu_composed",
]


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


def _row_dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Σ_j a·b over the last axis, keepdims: (..., m) · (..., m) → (..., 1).

    One pass with no (..., m) temporary (np.sum(a * b) makes one and sums it: 4x the
    time at the attention's (8, 2, 128, 64)); the sum runs in another order than
    np.sum's, so the last bits may differ from the composed ops' (tests: 1e-14).
    """
    return np.einsum("...j,...j->...", a, b)[..., None]


def _divide_by_root(a: np.ndarray, root: float) -> None:
    """a /= root, in place. When root is a power of two (√dk for dk = 4, 16, 64, …),
    multiplying by 1/root is exact, so it gives the division's bits at a fraction of its
    cost (a float64 division is several times slower than a product)."""
    if math.frexp(root)[0] == 0.5:  # root = 2^k: 1/root is exact, and so is a·(1/root)
        a *= 1.0 / root
    else:
        a /= root


@functools.lru_cache(maxsize=8)
def _future_mask(n: int, r: int) -> tuple[np.ndarray, np.ndarray]:
    """(future, visible) for r stacked heads of n queries: (r·n, n) booleans, read-only.
    future[i, j] is True when key j comes after query i mod n. Made once per (n, r)."""
    future = np.tile(np.triu(np.ones((n, n), dtype=bool), k=1), (r, 1))  # (r·n, n)
    visible = ~future
    future.flags.writeable = visible.flags.writeable = False
    return future, visible


def _causal_softmax(scores: np.ndarray, future: np.ndarray, visible: np.ndarray) -> np.ndarray:
    """softmax_np(masked_fill(scores, future, −inf), axis=-1), computed in scores' own buffer
    (the caller's array, overwritten and returned).

    The same operations on the visible entries, so the same bits: subtract the row's
    maximum, exponentiate, divide by the row's sum; the future's probabilities are written
    as the exact 0 that exp(−inf) gives. The −inf is never written: the maximum and exp
    skip the future with ``where=`` instead (exp(−inf) takes NumPy's slow path for special
    values: half the entries −inf cost 2x a plain exp).
    """
    if scores.size == 0:
        return softmax_np(scores, axis=-1)
    scores -= np.max(scores, axis=-1, keepdims=True, where=visible, initial=-np.inf)
    np.exp(scores, out=scores, where=visible)  # the largest visible entry is exp(0) = 1
    np.copyto(scores, 0.0, where=future)  # exp(−inf) = 0, written
    scores /= np.sum(scores, axis=-1, keepdims=True)
    return scores


def _grouped_attention(
    qg: np.ndarray, k: np.ndarray, v: np.ndarray, r: int
) -> tuple[np.ndarray, np.ndarray]:
    """The forward math of `causal_attention` on arrays: (out, p), both new arrays.

    qg (B, Hkv, r·n, dk): the r query heads of each key/value head stacked;
    k, v (B, Hkv, n, dk) → out (B, Hkv, r·n, dk) and p (B, Hkv, r·n, n) (the
    probabilities, kept for the backward).
    """
    n, dk = k.shape[-2:]
    future, visible = _future_mask(n, r)  # (r·n, n) each
    scores = np.matmul(qg, np.swapaxes(k, -1, -2))  # (B, Hkv, r·n, n)
    _divide_by_root(scores, math.sqrt(dk))  # divided, as the composed form does
    p = _causal_softmax(scores, future, visible)  # in scores' buffer
    return np.matmul(p, v), p


def _grouped_attention_grads(
    gg: np.ndarray, p: np.ndarray, qg: np.ndarray, k: np.ndarray, v: np.ndarray,
    need_qk: bool = True,
) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray]:
    """The backward math of `causal_attention` on arrays: (gq·√dk, gk·√dk, gv), grouped.

    gg (B, Hkv, r·n, dk) is the gradient of out; gq is (B, Hkv, r·n, dk), gk and gv
    (B, Hkv, n, dk). gq and gk are None when not `need_qk`. The caller divides gq and gk
    by √dk (the scores' scale), where it is cheapest: they are smaller than ds.
    """
    gv = np.matmul(np.swapaxes(p, -1, -2), gg)  # pᵀ·g, summed over the group's heads
    if not need_qk:
        return None, None, gv
    ds = np.matmul(gg, np.swapaxes(v, -1, -2))  # dp (B, Hkv, r·n, n)
    ds -= _row_dot(ds, p)  # Σ_j dp·p, (B, Hkv, r·n, 1)
    ds *= p  # masked entries have p = 0, so ds = 0 there
    return np.matmul(ds, k), np.matmul(np.swapaxes(ds, -1, -2), qg), gv


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
    qg = q.data.reshape(B, hkv, H // hkv * n, dk)  # (B, Hkv, r·n, dk): the group's heads stacked
    k_data, v_data = k.data, v.data
    out, p = _grouped_attention(qg, k_data, v_data, H // hkv)  # (B, Hkv, r·n, dk), p

    def backward(g: np.ndarray):
        gg = g.reshape(B, hkv, H // hkv * n, dk)  # (B, Hkv, r·n, dk)
        gq, gk, gv = _grouped_attention_grads(
            gg, p, qg, k_data, v_data, need_qk=q.requires_grad or k.requires_grad
        )
        if gq is not None:
            _divide_by_root(gq, math.sqrt(dk))
            _divide_by_root(gk, math.sqrt(dk))
        return (gq.reshape(B, H, n, dk) if q.requires_grad else None,
                gk if k.requires_grad else None,
                gv if v.requires_grad else None)

    return Tensor._make(out.reshape(B, H, n, dk), (q, k, v), "causal_attention", backward)


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


def attention(
    x: Tensor,
    wq: Tensor,
    wk: Tensor,
    wv: Tensor,
    wo: Tensor,
    n_heads: int,
    n_kv_heads: int,
    cos: np.ndarray,
    sin: np.ndarray,
) -> Tensor:
    """Causal grouped-query self-attention with rotary positions as one node: the math of
    `glassllm.layers.attention`, whose composed form is `attention_composed`.

    Shapes: x (B, n, d); wq (d, H·dk); wk, wv (d, Hkv·dk); wo (H·dk, d); cos, sin
    (n, dk/2); out (B, n, d). The caller (`layers.attention`) has checked them.

    Forward, on x2 = x as (B·n, d), each projection split into heads (B, heads, n, dk):
        q = rope(x2·wq), k = rope(x2·wk), v = x2·wv   (rope: each (even, odd) pair · e^{iθ})
        heads = causal_attention(q, k, v)              (B, H, n, dk)
        merged = heads as (B·n, H·dk);  out = merged·wo

    Backward, with gm = g·woᵀ split into heads and causal_attention's backward giving
    gq, gk, gv from it:
        wo: mergedᵀ·g
        G = [gq·e^{−iθ} | gk·e^{−iθ} | gv] as (B·n, (H + 2·Hkv)·dk): rope's transposed
            rotation, each gradient written in the column block of its projection
        x: G·[wq | wk | wv]ᵀ   (one product for the three projections)
        wq, wk, wv: the column blocks of x2ᵀ·G
        n_heads, n_kv_heads, cos, sin: not differentiable

    One node instead of fourteen (three projections, their reshapes and transposes, two
    ropes, causal_attention, the merge and the output projection): the forward does the
    same operations in the same order, though on other shapes (x as one (B·n, d) product,
    a group's query heads stacked), so BLAS may sum in another order: the same numbers up
    to rounding; the backward writes each head's gradient where the one product for x and
    the weights reads it.

    Example:
        >>> rng = np.random.default_rng(0)
        >>> x = Tensor(rng.normal(size=(1, 3, 8)))
        >>> w = [Tensor(rng.normal(size=s)) for s in [(8, 8), (8, 4), (8, 4), (8, 8)]]
        >>> cos, sin = np.cos(np.ones((3, 2))), np.sin(np.ones((3, 2)))
        >>> ref = attention_composed(x, *w, 2, 1, cos, sin).data
        >>> bool(np.allclose(attention(x, *w, 2, 1, cos, sin).data, ref, rtol=1e-12, atol=1e-12))
        True

    SPEC L6, L7. Vaswani et al. 2017; Su et al. 2021 (RoPE); Ainslie et al. 2023 (GQA).
    """
    B, n, d = x.shape
    H, hkv = n_heads, n_kv_heads
    dk, r = d // H, H // hkv
    x2 = x.data.reshape(B * n, d)  # (B·n, d)
    turn = _rotation(np.asarray(cos, dtype=np.float64), np.asarray(sin, dtype=np.float64))

    def heads(a2: np.ndarray, count: int) -> np.ndarray:
        """(B·n, count·dk) → (B, count, n, dk), a transposed view."""
        return a2.reshape(B, n, count, dk).transpose(0, 2, 1, 3)

    q = (_as_complex_pairs(heads(x2 @ wq.data, H)) * turn).view(np.float64)  # (B, H, n, dk)
    k = (_as_complex_pairs(heads(x2 @ wk.data, hkv)) * turn).view(np.float64)  # (B, Hkv, n, dk)
    v = heads(x2 @ wv.data, hkv)  # (B, Hkv, n, dk), a view
    qg = q.reshape(B, hkv, r * n, dk)  # the r query heads of a group stacked
    att, p = _grouped_attention(qg, k, v, r)  # (B, Hkv, r·n, dk), (B, Hkv, r·n, n)
    merged = att.reshape(B, H, n, dk).transpose(0, 2, 1, 3).reshape(B * n, H * dk)  # a copy
    out = (merged @ wo.data).reshape(B, n, d)

    def backward(g: np.ndarray):
        g2 = g.reshape(B * n, d)
        gwo = merged.T @ g2 if wo.requires_grad else None  # (H·dk, d)
        if not (x.requires_grad or wq.requires_grad or wk.requires_grad or wv.requires_grad):
            return None, None, None, None, gwo
        gm = heads(g2 @ wo.data.T, H)  # (B, H, n, dk), a view
        gg = gm.reshape(B, hkv, r * n, dk)  # grouped (a copy: gm is transposed)
        gq, gk, gv = _grouped_attention_grads(gg, p, qg, k, v)
        # G: the gradients of x2·wq, x2·wk, x2·wv side by side, in their (B, n, heads, dk)
        # layout, so that G as (B·n, (H + 2·Hkv)·dk) is the gradient of x2·[wq | wk | wv]
        G = np.empty((B, n, H + 2 * hkv, dk))
        unturn = np.conj(turn) / math.sqrt(dk)  # e^{−iθ}: rope's transposed rotation, and
        # the scores' 1/√dk that gq and gk still lack
        np.multiply(_as_complex_pairs(gq.reshape(B, H, n, dk)), unturn,
                    out=_as_complex_pairs(G[:, :, :H].transpose(0, 2, 1, 3)))
        np.multiply(_as_complex_pairs(gk), unturn,
                    out=_as_complex_pairs(G[:, :, H:H + hkv].transpose(0, 2, 1, 3)))
        G[:, :, H + hkv:] = gv.transpose(0, 2, 1, 3)
        G2 = G.reshape(B * n, (H + 2 * hkv) * dk)
        gx = None
        if x.requires_grad:
            w_all = np.concatenate([wq.data, wk.data, wv.data], axis=1)  # (d, (H+2·Hkv)·dk)
            gx = (G2 @ w_all.T).reshape(B, n, d)
        gw = x2.T @ G2  # (d, (H + 2·Hkv)·dk): the three weights' gradients side by side
        q_end, k_end = H * dk, (H + hkv) * dk
        return gx, gw[:, :q_end], gw[:, q_end:k_end], gw[:, k_end:], gwo

    return Tensor._make(out, (x, wq, wk, wv, wo), "attention", backward)


def attention_composed(
    x: Tensor,
    wq: Tensor,
    wk: Tensor,
    wv: Tensor,
    wo: Tensor,
    n_heads: int,
    n_kv_heads: int,
    cos: np.ndarray,
    sin: np.ndarray,
) -> Tensor:
    """The same math as `attention`, composed from autograd's ops (the reference).

    Shapes: x (B, n, d); wq (d, H·dk); wk, wv (d, Hkv·dk); wo (H·dk, d); cos, sin
    (n, dk/2); out (B, n, d).

    Backward: by the chain rule through matmul, reshape, transpose, rope and
    `causal_attention_composed`.
    """
    B, n, d = x.shape
    dk = d // n_heads

    def heads(w: Tensor, count: int) -> Tensor:  # (B, count, n, dk)
        return transpose(reshape(matmul(x, w), (B, n, count, dk)), (0, 2, 1, 3))

    q = rope(heads(wq, n_heads), cos, sin)  # (B, H, n, dk)
    k = rope(heads(wk, n_kv_heads), cos, sin)  # (B, Hkv, n, dk)
    out = causal_attention_composed(q, k, heads(wv, n_kv_heads))  # (B, H, n, dk)
    merged = reshape(transpose(out, (0, 2, 1, 3)), (B, n, n_heads * dk))  # (B, n, H·dk)
    return matmul(merged, wo)  # (B, n, d)


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
    out = np.multiply(x_data, x_data)  # x², in the output's buffer until the last line
    inv_rms = 1.0 / np.sqrt(np.sum(out, axis=-1, keepdims=True) / d + eps)  # (..., 1)
    y = _scale_rows(x_data, inv_rms)  # x · r, (..., d)
    np.multiply(y, w_data, out=out)  # (..., d)

    def backward(g: np.ndarray):
        gw = None
        if weight.requires_grad:  # Σ over the leading axes of g·y, in one pass
            gw = np.einsum("ij,ij->j", g.reshape(-1, d), y.reshape(-1, d))
        gx = None
        if x.requires_grad:
            gx = np.multiply(g, w_data)  # gy, (..., d)
            mean = _row_dot(gx, y)  # Σ gy·y, (..., 1)
            mean /= d
            gx -= _scale_rows(y, mean)  # gy − y·mean(gy·y)
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


# swiglu's forward runs on blocks of this many rows (of x as (N, d)). Measured at the bench
# shape (N = 512, d = 64, F = 192, one BLAS thread): 64 rows 7 % faster than the whole
# array, 32 and 128 rows no faster. A block's temporaries stay in the CPU's cache, and its
# products are small enough for OpenBLAS's small-matrix kernel, which skips packing.
_ROWS = 64
# ... and at least this many elements per block (rows × the wider of its two widths): the
# number of blocks follows the caller's N, so with narrow widths (d = F = 1) blocks of 64
# rows would spend ~10x more time in the loop's Python calls than in NumPy's work.
_BLOCK_ELEMENTS = 512


def _block_rows(width: int) -> int:
    """Rows per block for arrays `width` wide: `_ROWS`, more when they are narrow."""
    return max(_ROWS, _BLOCK_ELEMENTS // max(width, 1))


def _sum_of_row_block_products(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """aᵀ·b for a (N, m), b (N, k) → (m, k), as the sum over blocks of `_block_rows` rows
    of a_blockᵀ·b_block: the same sum in another order (the last bits may differ).

    Measured at swiglu's weight gradients ((64, 512) @ (512, 192) and (192, 512) @
    (512, 64), one BLAS thread): 10-13 % faster than one product, as the forward's blocks.
    """
    rows = _block_rows(max(a.shape[1], b.shape[1]))
    out = a[:rows].T @ b[:rows]
    for i in range(rows, a.shape[0], rows):
        out += a[i : i + rows].T @ b[i : i + rows]
    return out


def swiglu(x: Tensor, w1: Tensor, w2: Tensor, w3: Tensor) -> Tensor:
    """The SwiGLU feed-forward as one node: out = (silu(x·w1) * (x·w3))·w2.

    Shapes: x (..., d); w1, w3 (d, F); w2 (F, d); out (..., d). The caller
    (`layers.swiglu`) has checked the shapes.

    Forward, on x2 = x as (N, d): a = x2·w1, b = x2·w3, s = sigmoid(a), u = a·s = silu(a),
    h = u·b, out = h·w2 (row by row: computed on blocks of `_block_rows` rows, the same
    numbers).

    Backward, with gh = g·w2ᵀ (the gradient of h):
        w2: hᵀ·g
        b:  gb = gh·u
        a:  ga = (gh·b)·(s + u·(1 − s))        (silu'(a) = s + a·s·(1 − s))
        w1: x2ᵀ·ga;  w3: x2ᵀ·gb      (these three summed over blocks of rows)
        x: ga·w1ᵀ + gb·w3ᵀ

    Example:
        >>> one = Tensor(np.eye(2))
        >>> x = Tensor([[0.0, 2.0]])
        >>> bool(np.array_equal(swiglu(x, one, one, one).data,
        ...                     swiglu_composed(x, one, one, one).data))
        True

    SPEC L7. Shazeer 2020, "GLU Variants Improve Transformer"; silu: Elfwing et al. 2018.
    """
    x_data, w1_data, w2_data, w3_data = x.data, w1.data, w2.data, w3.data
    (d, F), d_out = w1_data.shape, w2_data.shape[1]
    x2 = x_data.reshape(-1, d)  # (N, d)
    N = x2.shape[0]
    s, u, b, h = (np.empty((N, F)) for _ in range(4))  # kept for the backward
    out = np.empty((N, d_out))
    block = _block_rows(max(d, F))
    for i in range(0, N, block):  # a block of rows at a time: its temporaries stay in cache
        rows = slice(i, i + block)
        a = np.matmul(x2[rows], w1_data, out=u[rows])  # a, then silu(a) in its place
        np.matmul(x2[rows], w3_data, out=b[rows])
        _sigmoid_data(a, out=s[rows])
        np.multiply(a, s[rows], out=a)  # u = silu(a): the backward needs no a
        np.multiply(a, b[rows], out=h[rows])
        np.matmul(h[rows], w2_data, out=out[rows])
    out = out.reshape(*x_data.shape[:-1], d_out)  # (..., d)

    def backward(g: np.ndarray):
        g2 = g.reshape(-1, g.shape[-1])  # (N, d)
        gw2 = _sum_of_row_block_products(h, g2) if w2.requires_grad else None  # (F, d)
        if not (x.requires_grad or w1.requires_grad or w3.requires_grad):
            return None, None, gw2, None
        gh = g2 @ w2_data.T  # (N, F)
        gb = gh * u  # (N, F)
        silu_grad = 1.0 - s
        silu_grad *= u
        silu_grad += s  # s + u·(1 − s), silu's derivative
        ga = gh  # gh is not needed after this: ga is computed in its buffer
        ga *= b
        ga *= silu_grad  # ga = (gh·b)·silu'(a)
        gw1 = _sum_of_row_block_products(x2, ga) if w1.requires_grad else None  # (d, F)
        gw3 = _sum_of_row_block_products(x2, gb) if w3.requires_grad else None  # (d, F)
        gx = None
        if x.requires_grad:
            gx = ga @ w1_data.T
            gx += gb @ w3_data.T
            gx = gx.reshape(x_data.shape)  # (..., d)
        return gx, gw1, gw2, gw3

    return Tensor._make(out, (x, w1, w2, w3), "swiglu", backward)


def swiglu_composed(x: Tensor, w1: Tensor, w2: Tensor, w3: Tensor) -> Tensor:
    """The same math as `swiglu`, composed from autograd's ops (the reference).

    Shapes: x (..., d); w1, w3 (d, F); w2 (F, d); out (..., d).

    Backward: by the chain rule through matmul, silu, mul, matmul.
    """
    return matmul(silu(matmul(x, w1)) * matmul(x, w3), w2)  # (..., d)
